"""A turn's state is its attempt's (agents.turn_state.TurnState), not the agent's: a second turn
of the same agent sees nothing the first left, and a paused turn's continuation resumes the
state its pause saved."""

from __future__ import annotations

import threading

import pytest

from agents import dispatch, tool_deadline
from agents.model import build_model
from agents.rollback_agent import RollbackAgent
from agents.worker import run_turn
from checkpoints.services import checkpoint_create
from sessions_app.approvals import turn_approve
from sessions_app.models import LedgerEntry, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.turns import turn_cancel, turn_start
from sessions_app.turns.paused import paused_state
from tests.agents import approval_tools
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.waits import until

EMAIL = {"to": "bob@example.com", "subject": "hello"}


@pytest.fixture
def tools(settings):
    settings.AGENT_TOOLS = ["tests.agents.approval_tools.send_email"]
    approval_tools.SENT.clear()
    yield approval_tools
    approval_tools.SENT.clear()


def python_agent(session, alice, **kwargs) -> RollbackAgent:
    return RollbackAgent(
        external_session_id=session.pk,
        model=build_model(session.settings),
        user=alice,
        skip_session_creation=True,
        **kwargs,
    )


def tool_messages(session):
    return [m for m in branch_history(current_branch(session)) if m.role == "tool"]


def answer(turn: Turn, approved: bool) -> None:
    pending = turn.pending_approval
    turn_approve(
        turn=turn,
        tool_call_id=pending["tool_call_id"],
        approved=approved,
        call=pending["call"],
        attempt=pending["attempt"],
    )


@pytest.mark.django_db
def test_a_second_turn_does_not_see_the_rollback_the_first_asked_for(
    fake_llm, session, branch, alice
):
    checkpoint_create(branch=branch, name="start")
    agent = python_agent(session, alice)
    fake_llm.queue(
        ToolCalls([ToolCall("rollback_to_checkpoint_tool", {"checkpoint_id_or_name": "start"})]),
        Reply("Asked."),
        Reply("Hello."),
    )
    agent.run("roll back to start")
    # Seed 003: the request waits in the agent's state for its caller, after the turn.
    assert agent.requested_rollback is not None
    assert agent.last_turn.metadata["rollback_requested"] == agent.requested_rollback
    assert agent.turn_state is None  # the attempt is over: the agent holds nothing of it

    agent.run("hello")

    assert agent.requested_rollback is None
    assert "rollback_requested" not in agent.last_turn.metadata
    assert "rollback_requested" not in agent.get_session_state()


@pytest.mark.django_db
def test_a_call_given_up_on_in_one_turn_is_not_taken_for_the_same_call_of_the_next(
    fake_llm, session, alice, settings
):
    """The calls given up on are the attempt's: the same tool with the same arguments, called
    again in the agent's next turn and answering, is no call that may have run."""
    settings.TURN_STOP_POLL_SECONDS = 0.05
    release = threading.Event()
    calls: list[str] = []

    def sync(job: str) -> str:
        """Sync a job with the outside system."""
        calls.append(job)
        if len(calls) == 1:
            release.wait(30)  # the first call hangs past its deadline
        return f"synced {job}"

    agent = python_agent(session, alice, tools=[sync])
    # Long enough for the call to start on the tool executor first: one that has not started
    # by its deadline is never run (`✗ Not run`, not `may_have_run`), and CI's loaded machine
    # once took longer than the 0.2 s this was to start its thread.
    agent.tool_timeouts["sync"] = 3.0
    fake_llm.queue(
        ToolCalls([ToolCall("sync", {"job": "a"})]),
        Reply("Gave up."),
        ToolCalls([ToolCall("sync", {"job": "a"})]),
        Reply("Synced."),
    )
    try:
        agent.run("sync a")
        release.set()
        until(lambda: tool_deadline.stats()["abandoned"] == 0, "the hung call to return")
        agent.run("sync a again")
    finally:
        release.set()

    first, second = tool_messages(session)
    assert calls == ["a", "a"]  # the first call started, and hung past its deadline
    assert first.metadata == {"error": True, "may_have_run": True}
    assert second.tool_result == "synced a"
    assert second.metadata == {}
    assert agent.last_turn.tools_used == ["sync"]


@pytest.mark.django_db
def test_run_takes_this_calls_approver_and_listener(fake_llm, tools, session, alice):
    """`run`'s callbacks are the call's: nothing to set on the agent and take off again."""
    fake_llm.queue(ToolCalls([ToolCall("send_email", EMAIL, id="call_mail")]), Reply("Sent."))
    agent = python_agent(session, alice)
    asked: list[str] = []
    heard: list[str] = []

    output = agent.run(
        "mail bob",
        approver=lambda pending: asked.append(pending["tool_name"]) or True,
        on_event=lambda event: heard.append(event["type"]),
    )

    assert output is not None
    assert output.content == "Sent."
    assert asked == ["send_email"]
    assert "tool.finished" in heard
    assert tools.SENT == [("bob@example.com", "hello")]
    assert (agent.approver, agent.on_event) == (None, None)


@pytest.mark.django_db(transaction=True)
def test_a_continuation_resumes_the_session_state_its_pause_saved(fake_llm, tools, session):
    """A todo the model added before the call that waited is the turn's: its pause saves it, and
    the continuation (a new attempt, a new agent) stores it with the turn."""
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("create_todo", {"title": "write it"}, id="call_todo"),
                ToolCall("send_email", EMAIL, id="call_mail"),
            ]
        )
    )
    turn = turn_start(session=session, message="plan it, then mail bob")
    run_turn(turn.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    saved = paused_state(turn.metadata)["session_state"]
    assert saved["todos"] == [{"id": 1, "title": "write it", "done": False}]

    fake_llm.queue(Reply("Planned and mailed."))
    answer(turn, True)
    dispatch.drain()

    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    assert tools.SENT == [("bob@example.com", "hello")]
    assert current_branch(session).session_state == {
        "todos": [{"id": 1, "title": "write it", "done": False}]
    }


@pytest.mark.django_db(transaction=True)
def test_a_rollback_asked_for_before_a_pause_is_carried_out_after_it(
    fake_llm, tools, session, branch
):
    checkpoint_create(branch=branch, name="start")
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("rollback_to_checkpoint_tool", {"checkpoint_id_or_name": "start"}),
                ToolCall("send_email", EMAIL, id="call_mail"),
            ]
        )
    )
    turn = turn_start(session=session, message="mail bob, then roll back to start")
    run_turn(turn.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.AWAITING_APPROVAL

    fake_llm.queue(Reply("Mailed; rolling back."))
    answer(turn, True)
    dispatch.drain()

    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    assert turn.rolled_back_to is not None
    assert turn.rolled_back_to.checkpoint_name == "start"
    assert current_branch(session).pk == turn.metadata["rollback_branch"] != branch.pk


def refused_then_paused_again(fake_llm, session) -> Turn:
    """A turn whose first call the owner refused, paused again at a second call by the
    continuation that gave the model the refusal."""
    fake_llm.queue(ToolCalls([ToolCall("send_email", EMAIL, id="call_a")]))
    turn = turn_start(session=session, message="mail bob")
    run_turn(turn.pk)
    turn.refresh_from_db()
    fake_llm.queue(ToolCalls([ToolCall("send_email", {**EMAIL, "subject": "again"}, id="call_b")]))
    answer(turn, False)
    dispatch.drain()
    turn.refresh_from_db()
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert turn.pending_approval["tool_call_id"] == "call_b"
    return turn


@pytest.mark.django_db(transaction=True)
def test_a_call_refused_before_a_later_pause_is_still_one_that_did_not_run(
    fake_llm, tools, session
):
    """The calls a turn refused are its state: the pause saves them, so the attempt that stores
    the turn still knows the refused call did not run (no effect, no ledger entry)."""
    turn = refused_then_paused_again(fake_llm, session)

    fake_llm.queue(Reply("Sent the second."))
    answer(turn, True)
    dispatch.drain()

    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    effects = {m.tool_call_id: m.effect for m in tool_messages(session)}
    assert effects == {"call_a": "none", "call_b": "external"}
    assert list(LedgerEntry.objects.values_list("tool_name", "status")) == [("send_email", "ran")]
    assert tools.SENT == [("bob@example.com", "again")]


@pytest.mark.django_db(transaction=True)
def test_a_stop_during_a_later_pause_keeps_a_refused_call_as_one_that_did_not_run(
    fake_llm, tools, session
):
    turn = refused_then_paused_again(fake_llm, session)

    turn_cancel(turn=turn)

    turn.refresh_from_db()
    assert turn.status == "cancelled"
    effects = {m.tool_call_id: m.effect for m in tool_messages(session)}
    assert effects["call_a"] == "none"
    assert not LedgerEntry.objects.exists()
    assert tools.SENT == []
