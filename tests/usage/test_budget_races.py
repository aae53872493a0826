"""Budgets under parallel turns, on PostgreSQL (SQLite serialises every writer): turns of one
user started at the same moment in different sessions can overspend the budget by at most one
turn each, and none starts once it is used up (issue 40 item 4)."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest

from agents.services import turn_submit
from sessions_app.models import Turn
from sessions_app.services import session_create
from tests.fakes.chat_server import Reply
from tests.sessions_app.test_concurrency import _run_threads
from usage.errors import BudgetExhausted
from usage.models import Budget, UsageRecord
from usage.selectors import budget_states

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 6
TURN_TOKENS = 60  # what the model server reports for each answer (30 in, 30 out)
LIMIT = 200


def test_parallel_turns_overspend_by_at_most_one_turn_each_and_then_all_are_refused(
    alice, fake_llm, inline_turns
):
    fake_llm.default = lambda body: Reply("ok", prompt_tokens=30, completion_tokens=30)
    Budget.objects.create(user=alice, period="day", unit="tokens", limit=Decimal(LIMIT))
    # Named sessions: no title is asked for (a call of its own), so each turn costs TURN_TOKENS.
    sessions = [session_create(owner=alice, name=f"parallel {i}") for i in range(THREADS)]
    refused: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        for n in range(20):  # until refused: the budget ends each thread's loop
            try:
                turn = turn_submit(session=sessions[i], message=f"{i}-{n}")
            except BudgetExhausted:
                with lock:
                    refused.append(i)
                return
            turn.refresh_from_db()
            assert turn.status == Turn.Status.DONE, turn.error

    assert _run_threads(work, THREADS) == []
    assert sorted(refused) == list(range(THREADS))  # every thread was refused in the end
    records = UsageRecord.objects.filter(user=alice)
    used = sum(r.input_tokens + r.output_tokens for r in records)
    done = Turn.objects.filter(session__owner=alice, status=Turn.Status.DONE).count()
    assert used == done * TURN_TOKENS == records.count() * TURN_TOKENS
    assert used >= LIMIT  # it was spent
    assert used <= LIMIT + THREADS * TURN_TOKENS  # at most one turn over, each
    assert budget_states(alice)[0].spent
