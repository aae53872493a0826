"""A tool call that needs approval pauses its turn until the owner answers, the turn is
cancelled, the wait times out, or its worker dies and another takes the turn over."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from agents import dispatch
from agents.services import turns_recover
from core import events
from sessions_app.approvals import args_digest, turn_approve
from sessions_app.errors import NothingAwaitsApproval, TurnInProgress
from sessions_app.models import Message, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.turns import (
    turn_cancel,
    turn_claim,
    turn_heartbeat,
    turn_recover_stale,
    turn_start,
)
from tests.agents import approval_tools
from tests.agents.test_claims import _celery_worker, _embedded
from tests.conftest import run_hearing
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.waits import until

# Real commits, as in a worker: the owner answers from another transaction.
pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = {"to": "bob@example.com", "subject": "hello"}


@pytest.fixture
def email_tool(settings):
    settings.AGENT_TOOLS = ["tests.agents.approval_tools.send_email"]
    approval_tools.SENT.clear()
    yield approval_tools.SENT
    approval_tools.SENT.clear()


def script(fake_llm, *, call_id: str = "call_mail") -> None:
    fake_llm.queue(ToolCalls([ToolCall("send_email", EMAIL, id=call_id)]))
    fake_llm.queue(Reply("Done."))


def run_answering(
    session, turn: Turn, answer: Callable[[dict], None] | None
) -> tuple[Turn, list[dict]]:
    """Run the turn here; `answer(event)` is called on each `tool.approval_requested`, as an
    owner in another tab would answer it."""
    seen: list[dict] = []

    def on_event(event: dict) -> None:
        seen.append(event)
        if event["type"] == "tool.approval_requested" and answer is not None:
            answer(event)

    run_hearing(turn, on_event)
    # The answer queued the turn's continuation (the attempt that asked ended, holding nothing):
    # it runs on the embedded pool; wait for it, hearing its events too.
    stop = events.listen(session.pk, on_event)
    try:
        dispatch.drain()
        for _ in range(5):
            turn.refresh_from_db()
            if turn.status != "awaiting_approval" or django_settings.AGENT_APPROVAL_SECONDS > 5:
                break
            # Nobody answers: the recovery job (beat's, or the embedded mode's) expires the wait
            # past AGENT_APPROVAL_SECONDS and queues the continuation, which tells the model.
            time.sleep(django_settings.AGENT_APPROVAL_SECONDS + 0.1)
            turns_recover()
            dispatch.drain()
    finally:
        stop()
    turn.refresh_from_db()
    return turn, seen


def approve(approved: bool) -> Callable[[dict], None]:
    def answer(event: dict) -> None:
        waiting = Turn.objects.get(pk=event["turn"])
        assert waiting.status == Turn.Status.AWAITING_APPROVAL
        assert waiting.pending_approval == {
            "tool_call_id": "call_mail",
            "tool_name": "send_email",
            "args": EMAIL,
            "args_sha256": args_digest(EMAIL),
            "attempt": 1,
            "call": 1,
        }
        turn_approve(turn=waiting, tool_call_id=event["tool_call_id"], approved=approved)

    return answer


def tool_message(session) -> Message:
    (message,) = [m for m in branch_history(current_branch(session)) if m.role == "tool"]
    return message


def kinds(seen: list[dict]) -> list[str]:
    wanted = {"tool.started", "tool.approval_requested", "tool.approval_answered", "tool.finished"}
    return [e["type"] for e in seen if e["type"] in wanted]


def test_an_approved_call_runs_once_and_the_turn_finishes(fake_llm, email_tool, session):
    script(fake_llm)
    turn = turn_start(session=session, message="mail bob")
    turn, seen = run_answering(session, turn, approve(True))

    assert email_tool == [("bob@example.com", "hello")]
    assert turn.status == "done"
    assert turn.pending_approval is None
    assert turn.tools_used == ["send_email"]
    assert turn.reply == "Done."
    # One start and one end: the continuation runs the call without announcing its start again.
    assert kinds(seen) == [
        "tool.started",
        "tool.approval_requested",
        "tool.approval_answered",
        "tool.finished",
    ]
    requested = next(e for e in seen if e["type"] == "tool.approval_requested")
    assert requested["tool_call_id"] == "call_mail"
    assert requested["args"] == EMAIL
    answered = next(e for e in seen if e["type"] == "tool.approval_answered")
    assert (answered["approved"], answered["reason"]) == (True, "approved")
    assert tool_message(session).tool_result == "sent to bob@example.com"
    assert tool_message(session).effect == "external"  # it ran: nothing here can undo it
    # The answer stays on the turn, for the record.
    assert turn.metadata["approvals"]["1:1"]["approved"] is True
    assert turn.metadata["approvals"]["1:1"]["tool_call_id"] == "call_mail"


def test_a_refused_call_never_runs_and_the_model_is_told(
    fake_llm, email_tool, session, client, alice
):
    script(fake_llm)
    turn = turn_start(session=session, message="mail bob")
    turn, seen = run_answering(session, turn, approve(False))

    assert email_tool == []
    assert turn.status == "done"
    assert turn.tools_used == []  # a refused call is not a used tool
    told = [m for m in fake_llm.messages(-1) if m["role"] == "tool"]
    assert len(told) == 1
    assert "refused" in told[0]["content"]
    assert "did not run" in told[0]["content"]
    answered = next(e for e in seen if e["type"] == "tool.approval_answered")
    assert (answered["approved"], answered["reason"]) == (False, "refused")
    finished = next(e for e in seen if e["type"] == "tool.finished")
    assert finished["error"] is True
    assert "refused" in tool_message(session).tool_result
    # It did not run: it had no effect, and no restore will list it as one it cannot undo.
    assert tool_message(session).effect == "none"
    # The page says it did not run, never that it failed.
    assert tool_message(session).metadata["refused"] is True
    client.force_login(alice)
    page = client.get(f"/chat/{session.pk}/").content.decode()
    assert "tool: send_email (not run)" in page
    assert "(failed)" not in page


def test_an_unanswered_call_times_out_as_a_refusal(fake_llm, email_tool, session, settings):
    settings.AGENT_APPROVAL_SECONDS = 0.3
    script(fake_llm)
    turn = turn_start(session=session, message="mail bob")
    # No thread waits: the recovery job expires it (run_answering runs it as beat would).
    turn, seen = run_answering(session, turn, None)

    assert email_tool == []
    assert turn.status == "done"
    answered = next(e for e in seen if e["type"] == "tool.approval_answered")
    assert (answered["approved"], answered["reason"]) == (False, "timed_out")
    told = [m for m in fake_llm.messages(-1) if m["role"] == "tool"]
    assert "within" in told[0]["content"]
    assert tool_message(session).effect == "none"
    assert turn.metadata["approvals"]["1:1"]["reason"] == "timed_out"
    # Too late to answer now: nothing waits.
    with pytest.raises(NothingAwaitsApproval):
        turn_approve(turn=turn, tool_call_id="call_mail", approved=True)


def test_a_turn_cancelled_during_the_wait_ends_cancelled_and_the_tool_never_runs(
    fake_llm, email_tool, session
):
    script(fake_llm)
    turn = turn_start(session=session, message="mail bob")
    turn, seen = run_answering(
        session, turn, lambda event: turn_cancel(turn=Turn.objects.get(pk=event["turn"]))
    )

    assert email_tool == []
    assert turn.status == "cancelled"
    assert turn.pending_approval is None
    assert len(fake_llm.requests) == 1  # the model was not asked again
    answered = next(e for e in seen if e["type"] == "tool.approval_answered")
    assert (answered["approved"], answered["reason"]) == (False, "cancelled")
    types = [e["type"] for e in seen]
    assert types.count("turn.cancelled") == 1
    assert "turn.finished" not in types
    assert "tool.finished" not in types


def test_a_second_turn_posted_during_the_wait_is_refused(fake_llm, email_tool, session):
    script(fake_llm)
    turn = turn_start(session=session, message="mail bob")
    refused: list[Exception] = []

    def post_another(event: dict) -> None:
        try:
            turn_start(session=session, message="and another thing")
        except TurnInProgress as exc:
            refused.append(exc)
        turn_approve(
            turn=Turn.objects.get(pk=event["turn"]), tool_call_id="call_mail", approved=True
        )

    turn, _ = run_answering(session, turn, post_another)
    assert len(refused) == 1
    assert turn.status == "done"


def test_a_second_answer_to_an_answered_call_or_to_another_call_conflicts(
    fake_llm, email_tool, session
):
    script(fake_llm)
    turn = turn_start(session=session, message="mail bob")
    outcomes: list[object] = []

    def answer_twice(event: dict) -> None:
        waiting = Turn.objects.get(pk=event["turn"])
        first = turn_approve(turn=waiting, tool_call_id="call_mail", approved=True)
        outcomes.append(first.status)
        for again in (True, False):  # nothing waits any more: the contract's 409
            with pytest.raises(NothingAwaitsApproval, match="already answered"):
                turn_approve(turn=waiting, tool_call_id="call_mail", approved=again)
        with pytest.raises(NothingAwaitsApproval):
            turn_approve(turn=waiting, tool_call_id="another_call", approved=True)
        outcomes.append("checked")

    turn, seen = run_answering(session, turn, answer_twice)
    # Queued for its continuation, which the pool may already have claimed (or finished) by the
    # time the answer reads the turn back: never still waiting, never failed.
    assert outcomes[0] in {"queued", "running", "done"}
    assert outcomes[1:] == ["checked"]
    assert email_tool == [("bob@example.com", "hello")]
    assert [e["type"] for e in seen].count("tool.approval_answered") == 1


def test_a_paused_turn_holds_no_worker_and_the_recovery_never_takes_it_for_a_dead_one(
    fake_llm, email_tool, session, settings
):
    # Issue 36: the premise of "a worker dies during the wait" is gone (no worker waits); a
    # paused turn whose last sign of life is old is left paused, with its saved state, and the
    # owner's answer still runs the call once.
    settings.AGENT_TURN_STALE_SECONDS = 15
    script(fake_llm)
    turn = turn_start(session=session, message="mail bob")
    turn, _ = run_answering(session, turn, None)
    assert turn.status == "awaiting_approval"
    assert turn.metadata["paused"]["pending"]["tool_call_id"] == "call_mail"
    Turn.objects.filter(pk=turn.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    done = turn_recover_stale(session_id=session.pk)
    assert (done.requeued, done.failed) == ([], [])
    turn.refresh_from_db()
    assert turn.status == "awaiting_approval"
    turn_approve(turn=turn, tool_call_id="call_mail", approved=True)
    dispatch.drain()
    turn.refresh_from_db()
    assert turn.status == "done"
    assert email_tool == [("bob@example.com", "hello")]
    assert turn.reply == "Done."


def test_tools_that_need_no_approval_run_without_a_pause(fake_llm, email_tool, session):
    fake_llm.queue(ToolCalls([ToolCall("calculate", {"expression": "6*7"})]))
    fake_llm.queue(Reply("42."))
    turn = turn_start(session=session, message="6*7?")
    turn, seen = run_answering(session, turn, approve(True))
    assert turn.status == "done"
    assert turn.tools_used == ["calculate"]
    assert "tool.approval_requested" not in [e["type"] for e in seen]


# --- the deployed shape: a Celery worker on Redis, or the embedded pool ----------------------


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.parametrize("runner", [_celery_worker, _embedded], ids=["celery", "embedded"])
@pytest.mark.parametrize("answer", ["approve", "cancel"])
def test_a_worker_pauses_and_an_answer_from_elsewhere_wakes_it(
    fake_llm, email_tool, session, settings, runner, answer
):
    settings.AGENT_APPROVAL_SECONDS = 60
    script(fake_llm)
    turn = turn_start(session=session, message="mail bob")
    with runner() as send:
        send(turn.pk)
        until(lambda: Turn.objects.get(pk=turn.pk).status == "awaiting_approval", "the wait")
        assert email_tool == []
        waiting = Turn.objects.get(pk=turn.pk)
        if answer == "approve":
            turn_approve(turn=waiting, tool_call_id="call_mail", approved=True)
        else:
            turn_cancel(turn=waiting)
        until(lambda: not Turn.objects.get(pk=turn.pk).is_active, "the turn's end")
        until(lambda: Turn.objects.get(pk=turn.pk).status != "running", "the turn's end")
    turn.refresh_from_db()
    if answer == "approve":
        assert turn.status == "done"
        assert email_tool == [("bob@example.com", "hello")]
    else:
        assert turn.status == "cancelled"
        assert email_tool == []
        assert len(fake_llm.requests) == 1


# --- the paused turn's row: heartbeat, recovery ------------------------------------------------


def _paused(session) -> Turn:
    turn = turn_claim(turn_id=turn_start(session=session, message="mail bob").pk)
    assert turn is not None
    assert approval_tools.pause(turn, "c1", EMAIL)
    return turn


def test_a_paused_turn_keeps_beating_and_is_not_taken_over_while_it_beats(session):
    turn = _paused(session)
    assert turn_heartbeat(turn=turn)
    assert turn_recover_stale(session_id=session.pk).requeued == []
    assert Turn.objects.get(pk=turn.pk).status == "awaiting_approval"
