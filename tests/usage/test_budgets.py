"""Budgets (issue 40 item 4): a turn that would start over one is refused before the model is
called, at every door, saying when it renews; a turn already running finishes and its cost
counts; administrators are exempt unless the budget says otherwise; every call is a transaction,
titles included."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from sessions_app.models import Message, Turn
from sessions_app.services import session_create
from tests.agents.approval_tools import SENT
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.usage.conftest import price, record
from tests.web.api.conftest import bearer_client
from usage.errors import BudgetExhausted
from usage.models import Budget, UsageRecord
from usage.selectors import budget_check, period_bounds

pytestmark = pytest.mark.django_db(transaction=True)


def send(user: User, session, text: str = "hi"):
    return bearer_client(user).post(
        f"/api/v1/sessions/{session.pk}/turns/", {"message": text, "wait": True}, format="json"
    )


def tomorrow_utc() -> str:
    return period_bounds("day", timezone.now())[1].strftime("%Y-%m-%d 00:00 UTC")


def test_a_turn_over_a_token_budget_is_refused_before_the_model_is_called_saying_when_it_renews(
    alice, fake_llm, inline_turns
):
    Budget.objects.create(user=alice, period="day", unit="tokens", limit=Decimal(100))
    session = session_create(owner=alice, name="s")
    fake_llm.queue(Reply("Under budget.", prompt_tokens=60, completion_tokens=50))
    assert send(alice, session).status_code == 201  # 0 of 100 used: it starts, and costs 110
    asked = len(fake_llm.requests)
    refused = send(alice, session, "again")
    assert refused.status_code == 429
    detail = refused.json()["detail"]
    assert "Your daily budget of 100 tokens is used up" in detail
    assert f"renews at {tomorrow_utc()}" in detail
    # Nothing stored of the refused message; the model was not asked again.
    assert Turn.objects.filter(session=session).count() == 1
    assert not Message.objects.filter(content="again").exists()
    assert len(fake_llm.requests) == asked
    # The page says the same where the message was typed.
    page = Client()
    page.force_login(alice)
    sent = page.post(
        reverse("chat:send", args=[session.pk]),
        {"message": "from the page"},
        HTTP_HX_REQUEST="true",
    )
    assert sent.status_code == 429
    assert "Your daily budget of 100 tokens is used up" in sent.content.decode()


def test_a_money_budget_counts_the_cost_at_the_price_of_the_time(alice, fake_llm, inline_turns):
    price("fake-model", "1000", "2000")  # per million: 60 in + 50 out = 0.06 + 0.10
    Budget.objects.create(user=alice, period="month", unit="cost", limit=Decimal("0.15"))
    session = session_create(owner=alice, name="s")
    fake_llm.queue(Reply("One.", prompt_tokens=60, completion_tokens=50))
    assert send(alice, session).status_code == 201
    turn_record = UsageRecord.objects.get(kind="turn")
    assert turn_record.cost == Decimal("0.16")
    assert turn_record.input_price == Decimal(1000)
    assert turn_record.output_price == Decimal(2000)
    # The price changes later: the record keeps the price of its time.
    price_row = type(turn_record)._meta.apps.get_model("usage", "ModelPrice").objects.get()
    price_row.input_per_million = Decimal(0)
    price_row.save()
    turn_record.refresh_from_db()
    assert turn_record.cost == Decimal("0.16")
    refused = send(alice, session, "again")
    assert refused.status_code == 429
    assert "Your monthly budget of $0.1500 is used up" in refused.json()["detail"]


def test_the_title_is_a_call_too_and_is_recorded(alice, fake_llm, inline_turns):
    session = session_create(owner=alice, name="New session")
    fake_llm.queue(Reply("Answered.", prompt_tokens=20, completion_tokens=5))
    assert send(alice, session).status_code == 201
    kinds = sorted(UsageRecord.objects.filter(user=alice).values_list("kind", flat=True))
    assert kinds == ["title", "turn"]
    title = UsageRecord.objects.get(kind="title")
    assert title.session_id == session.pk
    assert title.input_tokens == 11  # the fake server's title answer (tests/conftest.py)
    assert UsageRecord.objects.get(kind="turn").input_tokens == 20


def test_a_groups_budget_counts_its_members_together(alice, bob, fake_llm, inline_turns):
    team = Group.objects.create(name="team")
    team.user_set.add(alice, bob)
    Budget.objects.create(group=team, period="day", unit="tokens", limit=Decimal(100))
    record(bob, "fake-model", 80, 30, on=timezone.now())
    refused = send(alice, session_create(owner=alice, name="s"))
    assert refused.status_code == 429
    assert (
        "The group team's daily budget of 100 tokens is used up (110 tokens used)"
        in (refused.json()["detail"])
    )
    team.user_set.remove(alice)  # out of the group: its budget no longer bounds her
    fake_llm.queue(Reply("Free."))
    assert send(alice, session_create(owner=alice, name="t")).status_code == 201


def test_administrators_are_exempt_unless_the_budget_says_otherwise(
    admin_user, fake_llm, inline_turns
):
    budget = Budget.objects.create(user=admin_user, period="day", unit="tokens", limit=Decimal(1))
    record(admin_user, "fake-model", 10, 10, on=timezone.now())
    fake_llm.queue(Reply("Exempt."))
    assert send(admin_user, session_create(owner=admin_user, name="s")).status_code == 201
    budget.applies_to_administrators = True
    budget.save()
    assert send(admin_user, session_create(owner=admin_user, name="t")).status_code == 429


def test_only_the_budgets_own_period_counts_and_a_raised_limit_counts_at_once(
    alice, fake_llm, inline_turns
):
    budget = Budget.objects.create(user=alice, period="day", unit="tokens", limit=Decimal(100))
    start, end = period_bounds("day", timezone.now())
    record(alice, "fake-model", 500, 500, on=start - timedelta(seconds=1))  # yesterday
    fake_llm.queue(Reply("Today is new."))
    session = session_create(owner=alice, name="s")
    assert send(alice, session).status_code == 201
    # A clock that went back: a call dated after the period's end still counts in it.
    record(alice, "fake-model", 100, 0, on=end + timedelta(minutes=5))
    assert send(alice, session, "refused").status_code == 429
    budget.limit = Decimal(10_000)  # changed in the admin meanwhile
    budget.save()
    fake_llm.queue(Reply("Raised."))
    assert send(alice, session, "now").status_code == 201


def test_a_turn_queued_before_the_budget_ran_out_is_refused_when_a_worker_claims_it(
    alice, fake_llm, celery_eager
):
    from agents.worker import run_turn
    from sessions_app.turns import turn_start

    Budget.objects.create(user=alice, period="day", unit="tokens", limit=Decimal(100))
    turn = turn_start(session=session_create(owner=alice, name="s"), message="queued")
    record(alice, "fake-model", 100, 0, on=timezone.now())  # another turn spent it meanwhile
    run_turn(turn.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED
    assert "Your daily budget of 100 tokens is used up" in turn.error
    assert fake_llm.requests == []


def test_a_turn_already_running_finishes_over_budget_and_its_cost_counts(
    alice, fake_llm, inline_turns, settings
):
    settings.AGENT_TOOLS = ["tests.agents.approval_tools.send_email"]
    SENT.clear()
    Budget.objects.create(user=alice, period="day", unit="tokens", limit=Decimal(100))
    session = session_create(owner=alice, name="s")
    email = {"to": "bob@example.com", "subject": "hello"}
    fake_llm.queue(ToolCalls([ToolCall("send_email", email, id="call_mail")]))
    fake_llm.queue(Reply("Sent.", prompt_tokens=60, completion_tokens=60))
    waiting = send(alice, session, "mail bob")
    assert waiting.json()["status"] == "awaiting_approval", waiting.json()
    record(alice, "fake-model", 500, 0, on=timezone.now())  # the budget runs out meanwhile
    with pytest.raises(BudgetExhausted):
        budget_check(session)
    turn_id = waiting.json()["id"]
    answered = bearer_client(alice).post(
        f"/api/v1/turns/{turn_id}/approve/",
        {"tool_call_id": "call_mail", "approved": True},
        format="json",
    )
    assert answered.status_code == 200
    turn = Turn.objects.get(pk=turn_id)
    assert turn.status == Turn.Status.DONE, turn.error
    assert SENT  # the approved call ran
    # Both of its runs are on record: the one that asked, and the one that finished.
    runs = UsageRecord.objects.filter(turn_id=turn_id, kind="turn")
    assert runs.count() == 2
    assert sum(r.output_tokens for r in runs) >= 60
    SENT.clear()


def test_each_turn_of_a_python_api_agent_records_its_own_tokens(alice, fake_llm):
    """Seed 003's agent keeps its model from turn to turn: each turn's record holds its own."""
    from agents.model import build_model
    from agents.rollback_agent import RollbackAgent

    session = session_create(owner=alice, name="s")
    agent = RollbackAgent(external_session_id=session.pk, model=build_model(), user=alice)
    fake_llm.queue(
        Reply("one", prompt_tokens=10, completion_tokens=1),
        Reply("two", prompt_tokens=20, completion_tokens=2),
    )
    agent.run("first")
    agent.run("second")
    turns = UsageRecord.objects.filter(kind="turn").order_by("pk")
    assert [(r.input_tokens, r.output_tokens) for r in turns] == [(10, 1), (20, 2)]
