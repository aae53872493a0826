"""An approval belongs to one call of one attempt, never to a tool-call id alone: a model server
that repeats ids (two parallel calls sharing one, ids restarting with each response) gets each
call asked about, and a take-over never carries an answer to the new attempt (the call it had
approved is recorded as one that may have run, and asked about again, saying so)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.worker import run_turn
from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.approvals import MAY_HAVE_RUN_KEY, turn_approve
from sessions_app.errors import NothingAwaitsApproval
from sessions_app.models import Turn
from sessions_app.selectors import current_branch
from sessions_app.turns import turn_recover_stale, turn_start
from tests.agents import approval_tools
from tests.agents.test_approval import run_answering
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

pytestmark = pytest.mark.django_db(transaction=True)

TO_BOB = {"to": "bob@example.com", "subject": "hello"}
TO_EVE = {"to": "eve@example.com", "subject": "all our secrets"}


@pytest.fixture
def email_tool(settings):
    settings.AGENT_TOOLS = ["tests.agents.approval_tools.send_email"]
    approval_tools.SENT.clear()
    approval_tools.DURING.clear()
    yield approval_tools.SENT
    approval_tools.SENT.clear()
    approval_tools.DURING.clear()


@pytest.fixture
def short_wait(settings):
    """A call nobody answers is refused after a second: the owner never answers the second
    call in these tests, so an answer taken from the first would be the only way it ran."""
    settings.AGENT_APPROVAL_SECONDS = 1


def answer_each(*answers: bool | None):
    """Answer the calls asked about in turn: the first with answers[0], and so on, each by
    the call the event names (its id, place and attempt), as the page's buttons do; None
    leaves that one unanswered (it times out, as a refusal)."""
    given = list(answers)

    def answer(event: dict) -> None:
        yes = given.pop(0)
        if yes is None:
            return
        turn_approve(
            turn=Turn.objects.get(pk=event["turn"]),
            tool_call_id=event["tool_call_id"],
            approved=yes,
            call=event["call"],
            attempt=event["attempt"],
        )

    return answer


def asked(seen: list[dict]) -> list[tuple[str, int, object]]:
    return [
        (e["tool_call_id"], e["call"], e["args"])
        for e in seen
        if e["type"] == "tool.approval_requested"
    ]


def test_two_parallel_calls_sharing_an_id_are_asked_about_one_by_one(
    fake_llm, email_tool, session, short_wait
):
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("send_email", TO_BOB, id="call_1"),
                ToolCall("send_email", TO_EVE, id="call_1"),
            ]
        )
    )
    fake_llm.queue(Reply("One sent, one not."))
    turn = turn_start(session=session, message="mail bob and eve")
    turn, seen = run_answering(session, turn, answer_each(True, None))

    # Approving the first did not run the second: it was asked about, and never answered.
    assert email_tool == [("bob@example.com", "hello")]
    assert asked(seen) == [("call_1", 1, TO_BOB), ("call_1", 2, TO_EVE)]
    assert turn.status == "done"
    told = [m["content"] for m in fake_llm.messages(-1) if m["role"] == "tool"]
    assert told[0] == "sent to bob@example.com"
    assert "did not run" in told[1]
    answers = turn.metadata["approvals"]
    assert (answers["1:1"]["reason"], answers["1:1"]["args"]) == ("approved", TO_BOB)
    # Asked by the continuation (attempt 2) that ran the first: its answer is under that attempt.
    assert (answers["2:2"]["reason"], answers["2:2"]["args"]) == ("timed_out", TO_EVE)


def test_an_id_that_comes_again_in_the_next_response_needs_its_own_answer(
    fake_llm, email_tool, session, short_wait
):
    fake_llm.queue(ToolCalls([ToolCall("send_email", TO_BOB, id="call_1")]))
    fake_llm.queue(ToolCalls([ToolCall("send_email", TO_EVE, id="call_1")]))  # ids restarted
    fake_llm.queue(Reply("Done."))
    turn = turn_start(session=session, message="mail bob, then eve")
    turn, seen = run_answering(session, turn, answer_each(True, None))

    assert email_tool == [("bob@example.com", "hello")]
    assert asked(seen) == [("call_1", 1, TO_BOB), ("call_1", 2, TO_EVE)]
    ends = [e["reason"] for e in seen if e["type"] == "tool.approval_answered"]
    assert ends == ["approved", "timed_out"]
    assert turn.status == "done"
    assert turn.tools_used == ["send_email"]


def test_an_answer_by_a_repeated_id_alone_is_refused_as_ambiguous(fake_llm, email_tool, session):
    fake_llm.queue(ToolCalls([ToolCall("send_email", TO_BOB, id="call_1")]))
    fake_llm.queue(ToolCalls([ToolCall("send_email", TO_EVE, id="call_1")]))
    fake_llm.queue(Reply("Done."))
    turn = turn_start(session=session, message="mail bob, then eve")
    refusals: list[str] = []

    def answer(event: dict) -> None:
        waiting = Turn.objects.get(pk=event["turn"])
        if event["call"] == 2:
            # A late or repeated "approve call_1" (the old body, the id alone) cannot say which
            # call it means: it is refused, and the second call still waits.
            with pytest.raises(NothingAwaitsApproval) as refused:
                turn_approve(turn=waiting, tool_call_id="call_1", approved=True)
            refusals.append(refused.value.message)
            turn_approve(turn=waiting, tool_call_id="call_1", approved=False, call=2)
        else:  # the first: the id alone is enough (no other call had it)
            turn_approve(turn=waiting, tool_call_id="call_1", approved=True)

    turn, _ = run_answering(session, turn, answer)
    assert email_tool == [("bob@example.com", "hello")]
    assert len(refusals) == 1
    assert "`call`" in refusals[0]


def worker_dies_mid_call(session) -> list[int]:
    """While the tool runs (it has sent), its worker falls silent for longer than
    AGENT_TURN_STALE_SECONDS and the recovery job takes the turn over."""
    requeued: list[int] = []

    def die() -> None:
        Turn.objects.filter(session=session).update(
            heartbeat_at=timezone.now() - timedelta(minutes=5)
        )
        requeued.extend(t.pk for t in turn_recover_stale(session_id=session.pk).requeued)

    approval_tools.DURING.append(die)
    return requeued


def test_a_call_approved_by_a_worker_that_died_mid_call_is_recorded_and_asked_about_again(
    fake_llm, email_tool, session, settings, short_wait
):
    settings.TURN_HEARTBEAT_SECONDS = 600  # the first worker's heartbeat stays quiet
    settings.AGENT_TURN_STALE_SECONDS = 15
    checkpoint = checkpoint_create(branch=current_branch(session), name="before")
    # The call, approved; the continuation's worker dies while the tool runs (the model's
    # answer to it is never stored).
    fake_llm.queue(ToolCalls([ToolCall("send_email", TO_BOB, id="call_1")]))
    fake_llm.queue(Reply("(the dead worker's reply, never stored)"))
    fake_llm.queue(Reply("I did not send it again."))
    turn = turn_start(session=session, message="mail bob")
    requeued = worker_dies_mid_call(session)

    turn, _ = run_answering(session, turn, answer_each(True))
    assert requeued == [turn.pk]
    approval_tools.DURING.clear()
    assert turn.status == "queued"
    assert email_tool == [("bob@example.com", "hello")]  # it ran once
    # Issue 36: the continuation that ran it recorded it as started first, so the next one
    # (the recovery's) never runs it again unasked: it is on record as one that may have run,
    # and the model is told so.
    run_turn(turn.pk)
    turn.refresh_from_db()
    assert turn.status == "done"
    assert turn.reply == "I did not send it again."
    assert email_tool == [("bob@example.com", "hello")]  # not run a second time
    (record,) = turn.metadata[MAY_HAVE_RUN_KEY]
    assert (record["tool_call_id"], record["tool_name"], record["args"]) == (
        "call_1",
        "send_email",
        TO_BOB,
    )
    assert (record["attempt"], record["call"]) == (1, 1)
    told = [m["content"] for m in fake_llm.messages(-1) if m["role"] == "tool"]
    assert "may already have run" in told[0]
    # The record stays: through the turn's end, and a rewind past the turn.
    checkpoint_restore(checkpoint=checkpoint, session=session, mode="rewind")
    turn.refresh_from_db()
    assert [r["args"] for r in turn.metadata[MAY_HAVE_RUN_KEY]] == [TO_BOB]
    # An answer to the call now is a 409.
    with pytest.raises(NothingAwaitsApproval):
        turn_approve(turn=turn, tool_call_id="call_1", approved=True, call=1, attempt=1)
