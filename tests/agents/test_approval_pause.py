"""Issue 36: a turn that waits for an approval holds nothing. Its attempt ends with its state on
the turn's row; the answer queues a continuation that resumes it on any worker."""

from __future__ import annotations

import pytest

from agents import dispatch
from agents.worker import run_turn
from sessions_app.approvals import turn_approve
from sessions_app.errors import NothingAwaitsApproval
from sessions_app.models import Message, Turn
from sessions_app.services import session_create
from sessions_app.turns import turn_cancel, turn_start
from sessions_app.turns.paused import paused_messages, paused_state
from tests.agents import approval_tools
from tests.conftest import run_hearing
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.waits import until

pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = {"to": "bob@example.com", "subject": "hello"}


@pytest.fixture
def tools(settings):
    settings.AGENT_TOOLS = [
        "tests.agents.approval_tools.send_email",
        "tests.agents.approval_tools.note_outside",
    ]
    approval_tools.SENT.clear()
    approval_tools.NOTED.clear()
    yield approval_tools
    approval_tools.SENT.clear()
    approval_tools.NOTED.clear()


def paused_turn(session, fake_llm, calls=None) -> Turn:
    fake_llm.queue(ToolCalls(calls or [ToolCall("send_email", EMAIL, id="call_mail")]))
    turn = turn_start(session=session, message="mail bob")
    run_turn(turn.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    return turn


def answer(turn: Turn, approved: bool, *, resume: bool = True) -> Turn:
    """Approve or refuse the call `turn` waits for; `resume=False`: its continuation is not
    queued (the test delivers it itself, with `run_turn`)."""
    pending = turn.pending_approval
    return turn_approve(
        turn=turn,
        tool_call_id=pending["tool_call_id"],
        approved=approved,
        call=pending["call"],
        attempt=pending["attempt"],
        resume=resume,
    )


def test_twenty_paused_turns_hold_no_pool_thread_and_a_bystander_finishes(
    fake_llm, tools, alice, bob, settings
):
    settings.ROLLBACK_RUN_TURNS_INLINE = False
    for i in range(20):
        fake_llm.queue(ToolCalls([ToolCall("send_email", EMAIL, id=f"call_{i}")]))
    waiting = []
    for i in range(20):
        session = session_create(owner=alice, name=f"waits {i}")
        turn = turn_start(session=session, message="mail bob")
        dispatch.enqueue_turn(turn.pk)
        waiting.append(turn.pk)
    until(
        lambda: Turn.objects.filter(pk__in=waiting, status="awaiting_approval").count() == 20,
        "the 20 turns paused",
        timeout=60,
    )
    # The pool (4 threads) is free: the bystander's turn runs on it and finishes.
    fake_llm.queue(Reply("hello bob"))
    bystander = turn_start(session=session_create(owner=bob, name="bystander"), message="hi")
    dispatch.enqueue_turn(bystander.pk)
    until(lambda: Turn.objects.get(pk=bystander.pk).status == "done", "the bystander's turn")
    assert Turn.objects.get(pk=bystander.pk).reply == "hello bob"
    assert Turn.objects.filter(pk__in=waiting, status="awaiting_approval").count() == 20
    assert tools.SENT == []


def test_the_paused_state_is_on_the_row_and_the_continuation_runs_the_rest_of_the_batch(
    fake_llm, tools, session
):
    turn = paused_turn(
        session,
        fake_llm,
        [
            ToolCall("note_outside", {"text": "first"}, id="call_note"),
            ToolCall("send_email", EMAIL, id="call_mail"),
            ToolCall("note_outside", {"text": "after"}, id="call_after"),
        ],
    )
    # The call before the one that waits ran; the one after did not.
    assert tools.NOTED == ["first"]
    state = paused_state(turn.metadata)
    assert [c["id"] for c in state["assistant"]["tool_calls"]] == [
        "call_note",
        "call_mail",
        "call_after",
    ]
    assert list(state["results"].values()) == [["noted first", False]]
    assert [m["role"] for m in paused_messages(turn)] == ["assistant", "tool"]

    fake_llm.queue(Reply("Mailed and noted."))
    answer(turn, True)
    dispatch.drain()
    turn.refresh_from_db()
    assert turn.status == "done"
    assert turn.reply == "Mailed and noted."
    assert tools.SENT == [("bob@example.com", "hello")]
    assert tools.NOTED == ["first", "after"]  # the first never twice
    # The model resumed from the whole batch's results, in order.
    told = [m for m in fake_llm.messages(-1) if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in told] == ["call_note", "call_mail", "call_after"]
    assert paused_state(turn.metadata) is None  # its copy of the messages went with the pause


def test_each_call_of_the_batch_is_announced_once_across_the_pause(fake_llm, tools, session):
    """The pages and the API hear one tool.started and one tool.finished per call: the
    continuation replays the batch without announcing again what the paused attempt did."""
    heard: list[dict] = []
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("note_outside", {"text": "first"}, id="call_note"),
                ToolCall("send_email", EMAIL, id="call_mail"),
                ToolCall("note_outside", {"text": "after"}, id="call_after"),
            ]
        )
    )
    turn = turn_start(session=session, message="mail bob")
    run_hearing(turn, heard.append)
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    answer(turn, True, resume=False)
    fake_llm.queue(Reply("Mailed and noted."))
    run_hearing(turn, heard.append)
    assert turn.status == "done"

    told = [
        (e["type"], e.get("call_id") or e.get("tool_call_id"))
        for e in heard
        if e["type"].startswith("tool.")
    ]
    assert told == [
        ("tool.started", "call_note"),
        ("tool.finished", "call_note"),
        ("tool.started", "call_mail"),
        ("tool.approval_requested", "call_mail"),
        ("tool.finished", "call_mail"),
        ("tool.started", "call_after"),
        ("tool.finished", "call_after"),
    ]


def test_a_refusal_reaches_the_model_and_the_tool_never_runs(fake_llm, tools, session):
    turn = paused_turn(session, fake_llm)
    fake_llm.queue(Reply("I did not send it."))
    answer(turn, False)
    dispatch.drain()
    turn.refresh_from_db()
    assert (turn.status, turn.reply) == ("done", "I did not send it.")
    assert tools.SENT == []
    told = [m for m in fake_llm.messages(-1) if m["role"] == "tool"]
    assert "refused" in told[0]["content"]


def test_an_answer_twice_conflicts_and_the_continuation_runs_once(fake_llm, tools, session):
    turn = paused_turn(session, fake_llm)
    fake_llm.queue(Reply("Done."))
    answer(turn, True)
    with pytest.raises(NothingAwaitsApproval):
        turn_approve(turn=turn, tool_call_id="call_mail", approved=True)
    # Delivered twice: the second finds the turn claimed (or done) and runs nothing.
    run_turn(turn.pk)
    assert run_turn(turn.pk) is None
    dispatch.drain()
    turn.refresh_from_db()
    assert turn.status == "done"
    assert tools.SENT == [("bob@example.com", "hello")]


def test_a_stop_ends_a_paused_turn_at_once_and_its_ran_calls_stay_readable(
    fake_llm, tools, session
):
    turn = paused_turn(
        session,
        fake_llm,
        [
            ToolCall("note_outside", {"text": "first"}, id="call_note"),
            ToolCall("send_email", EMAIL, id="call_mail"),
        ],
    )
    turn_cancel(turn=turn)  # no worker involved
    turn.refresh_from_db()
    assert turn.status == "cancelled"
    with pytest.raises(NothingAwaitsApproval):
        turn_approve(turn=turn, tool_call_id="call_mail", approved=True)
    dispatch.drain()
    assert tools.SENT == []
    # What ran before the pause is stored as the stopped turn's; the saved state is gone.
    stored = [
        (m.role, m.tool_call_id or "")
        for m in Message.objects.filter(branch_id=turn.branch_id).order_by("position")
    ]
    assert stored[-3:] == [("assistant", ""), ("tool", "call_note"), ("assistant", "")]
    assert paused_state(turn.metadata) is None


def test_a_continuation_whose_session_was_deleted_ends_cleanly(fake_llm, tools, session):
    turn = paused_turn(session, fake_llm)
    answer(turn, True, resume=False)
    session.delete()
    assert run_turn(turn.pk) is None
    dispatch.drain()
    assert not Turn.objects.filter(pk=turn.pk).exists()
    assert tools.SENT == []


def test_a_continuation_whose_branch_was_deleted_fails_cleanly(fake_llm, tools, session):
    turn = paused_turn(session, fake_llm)
    answer(turn, True, resume=False)
    Turn.objects.filter(pk=turn.pk).update(branch=None)  # as a deleted branch leaves it
    run_turn(turn.pk)
    dispatch.drain()
    turn.refresh_from_db()
    assert turn.status == "failed"
    assert tools.SENT == []


def test_a_call_whose_continuation_died_mid_call_is_may_have_run_never_run_again(
    fake_llm, tools, session
):
    turn = paused_turn(session, fake_llm)
    answer(turn, True, resume=False)
    # The continuation recorded the call as started, then its worker was killed; the recovery
    # queued the turn again (as a new attempt).
    state = paused_state(Turn.objects.get(pk=turn.pk).metadata)
    key = f"{state['pending']['attempt']}:{state['pending']['call']}"
    metadata = Turn.objects.get(pk=turn.pk).metadata
    Turn.objects.filter(pk=turn.pk).update(
        metadata={**metadata, "paused": {**state, "started": key}}
    )
    fake_llm.queue(Reply("It may have been sent."))
    run_turn(turn.pk)
    dispatch.drain()
    turn.refresh_from_db()
    assert turn.status == "done"
    assert tools.SENT == []  # never run a second time unasked
    assert [r["tool_name"] for r in turn.metadata["may_have_run"]] == ["send_email"]
    told = [m for m in fake_llm.messages(-1) if m["role"] == "tool"]
    assert "may already have run" in told[0]["content"]


def python_agent(session, alice):
    from agents.model import build_model
    from agents.rollback_agent import RollbackAgent

    return RollbackAgent(
        external_session_id=session.pk,
        model=build_model(session.settings),
        user=alice,
        skip_session_creation=True,
    )


def test_the_python_api_answers_an_approval_in_process_with_a_callback(
    fake_llm, tools, session, alice
):
    fake_llm.queue(ToolCalls([ToolCall("send_email", EMAIL, id="call_mail")]), Reply("Sent."))
    agent = python_agent(session, alice)
    asked: list[dict] = []
    agent.approver = lambda pending: asked.append(pending) or True
    output = agent.run("mail bob")
    assert output is not None
    assert output.content == "Sent."
    assert [p["tool_name"] for p in asked] == ["send_email"]
    assert agent.last_turn.status == "done"
    assert tools.SENT == [("bob@example.com", "hello")]


def test_the_python_api_leaves_the_turn_waiting_and_answer_approval_resumes_it(
    fake_llm, tools, session, alice
):
    fake_llm.queue(ToolCalls([ToolCall("send_email", EMAIL, id="call_mail")]), Reply("Not sent."))
    agent = python_agent(session, alice)
    assert agent.run("mail bob") is None
    assert agent.last_turn.status == "awaiting_approval"
    assert tools.SENT == []
    output = agent.answer_approval(False)
    assert output is not None
    assert output.content == "Not sent."
    assert agent.last_turn.status == "done"
    assert tools.SENT == []
    with pytest.raises(NothingAwaitsApproval):
        agent.answer_approval(True)
