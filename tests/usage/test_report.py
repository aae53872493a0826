"""What a user's usage adds up to (usage.selectors.usage_report, conversation_usage): the sum of
their recorded transactions, split by day (UTC) and by model, and nobody else's."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.db.models import Sum

from sessions_app.models import Branch, Session
from sessions_app.selectors import current_branch
from sessions_app.services import branch_fork
from tests.fakes.chat_server import Reply
from tests.usage.conftest import day, price, record
from tests.web.api.conftest import bearer_client
from usage.models import UsageRecord
from usage.selectors import conversation_usage, usage_report

pytestmark = pytest.mark.django_db


def _sums(records) -> tuple[int, int, Decimal]:
    got = records.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cost"))
    return got["i"] or 0, got["o"] or 0, got["c"] or Decimal(0)


@pytest.mark.django_db(transaction=True)
def test_real_turns_add_up_to_their_recorded_transactions(alice, bob, fake_llm, inline_turns):
    price("fake-model", "3", "15")
    api = bearer_client(alice)
    sid = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()["id"]
    for text in ("One.", "Two."):
        fake_llm.queue(Reply(text, prompt_tokens=1_000, completion_tokens=200))
        done = api.post(
            f"/api/v1/sessions/{sid}/turns/", {"message": "hi", "wait": True}, format="json"
        )
        assert done.json()["status"] == "done"
    bobs = bearer_client(bob)
    bob_sid = bobs.post("/api/v1/sessions/", {"name": "b"}, format="json").json()["id"]
    fake_llm.queue(Reply("Bob's.", prompt_tokens=5_000, completion_tokens=5_000))
    bobs.post(f"/api/v1/sessions/{bob_sid}/turns/", {"message": "hi", "wait": True}, format="json")

    mine = UsageRecord.objects.filter(user=alice)
    turns = mine.filter(kind="turn")
    assert turns.count() == 2
    assert _sums(turns) == (2_000, 400, Decimal("0.012"))  # (2,000 × 3 + 400 × 15) / 1e6
    today = mine.first().created_at.date()
    report = usage_report(alice, today, today)
    total = report.total
    assert (total.input_tokens, total.output_tokens, total.cost) == _sums(mine)
    assert [d.day for d in report.days] == [today]
    assert [m.key for m in report.models] == ["fake-model"]
    session = Session.objects.get(pk=sid)
    spent = conversation_usage(session, current_branch(session).pk)
    assert (spent.session.input_tokens, spent.session.output_tokens, spent.session.cost) == _sums(
        mine.filter(session=session)
    )
    assert spent.branch == spent.session  # one branch: all of it


def test_the_report_splits_by_day_utc_and_by_model(alice):
    price("big", "10", "30")
    record(alice, "big", 1_000, 100, on=day(2026, 12, 1, 23))
    record(alice, "small", 500, 50, on=day(2026, 12, 1, 1))
    record(alice, "big", 2_000, 200, on=day(2026, 12, 2, 0))
    record(alice, "big", 9_999, 9_999, on=day(2026, 11, 30, 23))  # before the period
    report = usage_report(alice, date(2026, 12, 1), date(2026, 12, 2))

    assert [d.day for d in report.days] == [date(2026, 12, 1), date(2026, 12, 2)]
    first, second = report.days
    assert [(r.key, r.input_tokens, r.output_tokens) for r in first.models] == [
        ("big", 1_000, 100),
        ("small", 500, 50),
    ]
    assert first.models[0].cost == Decimal("0.013")  # (1,000 × 10 + 100 × 30) / 1e6
    assert first.models[1].cost == 0  # no price: costs nothing
    assert (first.total.input_tokens, first.total.output_tokens) == (1_500, 150)
    assert [(r.key, r.input_tokens) for r in second.models] == [("big", 2_000)]
    assert [(r.key, r.input_tokens, r.output_tokens, r.cost) for r in report.models] == [
        ("big", 3_000, 300, Decimal("0.039")),
        ("small", 500, 50, Decimal(0)),
    ]
    assert (report.total.input_tokens, report.total.output_tokens) == (3_500, 350)
    assert report.total.cost == Decimal("0.039")


def test_nobody_elses_usage_counts(alice, bob):
    record(bob, "m", 700, 70, on=day(2026, 12, 1))
    assert usage_report(alice, date(2026, 12, 1), date(2026, 12, 1)).days == []
    assert usage_report(bob, date(2026, 12, 1), date(2026, 12, 1)).total.tokens == 770


def test_the_conversation_and_its_branch_count_apart(alice, session, branch):
    record(alice, "m", 100, 10, on=day(2026, 12, 1), session_id=session.pk, branch_id=branch.pk)
    other = branch_fork(branch=branch, position=0)
    record(alice, "m", 40, 4, on=day(2026, 12, 2), session_id=session.pk, branch_id=other.pk)
    record(alice, "m", 1, 1, on=day(2026, 12, 2))  # of no conversation
    spent = conversation_usage(session, other.pk)
    assert (spent.session.tokens, spent.session.calls) == (154, 2)
    assert (spent.branch.tokens, spent.branch.calls) == (44, 1)
    assert conversation_usage(session, Branch.objects.get(pk=branch.pk).pk).branch.tokens == 110
