"""Issue 36: a stopped turn keeps the tool messages of the calls that ran (with their effects:
the ledger and a restore agree), says what ran and what did not, can be regenerated, and the
model's next request never joins the stopped message to the next one: it gets a result for
every call and a note that the user stopped the turn."""

from __future__ import annotations

import pytest

from agents.history import NOT_RUN
from agents.services import turn_regenerate
from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import LedgerEntry, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.turns import stopped_line, turn_cancel, turn_start
from tests.agents import approval_tools, custom_tools
from tests.agents.test_approval_pause import answer
from tests.conftest import ask, run_hearing
from tests.fakes.chat_server import Error, Reply, ToolCall, ToolCalls
from tests.waits import until

pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = {"to": "bob@example.com", "subject": "hello"}
LONG = " ".join(f"word{i}" for i in range(40))


@pytest.fixture
def tools(settings):
    settings.AGENT_TOOLS = [
        "tests.agents.custom_tools.send_message",
        "tests.agents.custom_tools.slow_send",
        "tests.agents.custom_tools.slow_fail",
        "tests.agents.approval_tools.send_email",
    ]
    custom_tools.SENT.clear()
    approval_tools.SENT.clear()
    custom_tools.RELEASE.clear()
    yield
    custom_tools.RELEASE.set()  # no slow tool thread outlives its test
    custom_tools.SENT.clear()
    approval_tools.SENT.clear()


def stop_on(turn: Turn, kind: str, times: int = 1):
    """An event listener that stops `turn` (as Stop does from another tab) on the `times`-th
    event of type `kind`."""
    seen: list[dict] = []

    def on_event(event: dict) -> None:
        seen.append(event)
        if [e["type"] for e in seen].count(kind) == times and event["type"] == kind:
            turn_cancel(turn=Turn.objects.get(pk=turn.pk))

    return on_event


def rows(session) -> list[tuple[str, str]]:
    return [(m.role, m.tool_name or m.content) for m in branch_history(current_branch(session))]


def test_a_stop_during_an_approval_keeps_the_call_that_ran_and_says_the_other_did_not(
    fake_llm, session, tools
):
    fake_llm.queue(Reply("Hello."))
    ask(session, "hi")
    start = checkpoint_create(branch=current_branch(session), name="start")
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("send_message", {"to": "bob", "text": "hi"}, id="call_a"),
                ToolCall("send_email", EMAIL, id="call_b"),
            ]
        ),
        Reply("Done."),
    )
    turn = turn_start(session=session, message="message bob, then email him")
    run_hearing(turn, stop_on(turn, "tool.approval_requested"))

    assert turn.status == "cancelled"
    assert turn.finish_reason == "cancelled"
    assert turn.tools_used == ["send_message"]
    assert custom_tools.SENT == ["bob: hi"]
    assert approval_tools.SENT == []
    assert rows(session)[2:] == [
        ("user", "message bob, then email him"),
        ("assistant", ""),  # the calls
        ("tool", "send_message"),
        ("assistant", ""),  # the stopped reply: nothing was said
    ]
    stored = branch_history(current_branch(session))
    assert [c["id"] for c in stored[3].tool_calls] == ["call_a", "call_b"]
    assert stored[4].effect == "external"
    reply = stored[-1]
    assert reply.pk == turn.reply_message_id
    assert stopped_line(reply.metadata) == "Stopped: send_message ran; send_email did not"
    (entry,) = LedgerEntry.objects.filter(session=session)
    assert (entry.tool_name, entry.status) == ("send_message", "ran")
    assert entry.message_ref == stored[4].pk

    # The next request: the stopped message is not joined to the next one, the call that did
    # not run has a result saying so, and a note says the user stopped the turn.
    fake_llm.queue(Reply("Fine."))
    ask(session, "ok, forget that")
    sent = [m for m in fake_llm.messages(-1) if m["role"] != "system"]
    assert [m["role"] for m in sent] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    assert sent[2]["content"] == "message bob, then email him"
    assert [t["tool_call_id"] for t in sent[4:6]] == ["call_a", "call_b"]
    assert sent[5]["content"] == NOT_RUN.format(tool="send_email")
    assert "stopped this turn" in sent[6]["content"]
    assert "send_message ran; send_email did not" in sent[6]["content"]
    assert sent[7]["content"] == "ok, forget that"

    # A rewind past the stopped turn: its call is listed, its entry stays.
    result = checkpoint_restore(checkpoint=start, session=session, mode="rewind")
    assert [m.tool_name for m in result.irreversible] == ["send_message"]
    assert LedgerEntry.objects.filter(session=session).count() == 1


def _eventually(check, seconds: float = 15.0) -> bool:
    """Whether `check()` holds within `seconds` (an abandoned tool's thread ends on its own)."""
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.05)
    return check()


def test_a_stop_while_a_custom_tool_runs_ends_the_turn_and_keeps_the_call_as_may_have_run(
    fake_llm, session, tools
):
    """Stop does not wait for the tool (agents.tool_deadline abandons it): the turn ends, the
    call is on record as one that may have run, and the tool, which goes on, runs once."""
    fake_llm.queue(
        ToolCalls([ToolCall("slow_send", {"to": "ann", "text": "hi"}, id="call_s")]),
        Reply(LONG, delay=0.2),
    )
    turn = turn_start(session=session, message="tell ann")
    run_hearing(turn, stop_on(turn, "tool.started"))

    assert turn.status == "cancelled"
    assert custom_tools.SENT == []  # the turn ended before the tool did (it still waits)
    assert turn.tools_used == []
    assert [r for r in rows(session) if r[0] == "tool"] == []
    reply = branch_history(current_branch(session))[-1]
    assert stopped_line(reply.metadata) == "Stopped: slow_send may have run"
    (entry,) = LedgerEntry.objects.filter(session=session)
    assert entry.status == "may_have_run"
    assert len(fake_llm.requests) == 1  # the model was not asked again after the Stop
    custom_tools.RELEASE.set()  # the abandoned call goes on to its end, once
    assert _eventually(lambda: custom_tools.SENT == ["ann: hi"])
    assert LedgerEntry.objects.filter(session=session).count() == 1


def test_a_stop_during_a_call_whose_tool_then_fails_keeps_it_as_may_have_run(
    fake_llm, session, tools
):
    fake_llm.queue(
        ToolCalls([ToolCall("slow_fail", {"title": "bug"}, id="call_f")]),
        Reply("Filed."),
    )
    turn = turn_start(session=session, message="file it")
    run_hearing(turn, stop_on(turn, "tool.started"))

    assert turn.status == "cancelled"
    assert turn.tools_used == []
    reply = branch_history(current_branch(session))[-1]
    assert stopped_line(reply.metadata) == "Stopped: slow_fail may have run"
    (entry,) = LedgerEntry.objects.filter(session=session)
    assert entry.status == "may_have_run"


def test_a_stopped_turn_whose_calls_repeat_an_id_keeps_each_call(fake_llm, session, tools):
    fake_llm.queue(
        ToolCalls([ToolCall("send_message", {"to": "bob", "text": "one"}, id="call_1")]),
        ToolCalls([ToolCall("send_message", {"to": "bob", "text": "two"}, id="call_1")]),
        Reply(LONG, delay=0.2),
    )
    turn = turn_start(session=session, message="message bob twice")
    run_hearing(turn, stop_on(turn, "tool.finished", times=2))

    assert turn.status == "cancelled"
    stored = branch_history(current_branch(session))[1:]
    assert [(m.role, m.tool_call_id) for m in stored[:4]] == [
        ("assistant", ""),
        ("tool", "call_1"),
        ("assistant", ""),
        ("tool", "call_1"),
    ]
    assert [m.tool_args["text"] for m in stored if m.role == "tool"] == ["one", "two"]
    assert LedgerEntry.objects.filter(session=session, status="ran").count() == 2
    assert turn.tools_used == ["send_message", "send_message"]

    fake_llm.queue(Reply("Ok."))
    ask(session, "thanks")
    sent = [m["role"] for m in fake_llm.messages(-1) if m["role"] != "system"]
    assert sent == ["user", "assistant", "tool", "assistant", "tool", "assistant", "user"]


def paused_after_a_call(fake_llm, session, then) -> Turn:
    """A turn whose first batch sends a message (it runs) and whose second sends an email,
    which waits for approval; approved, then `then` is what the model does next. The turn,
    queued for its continuation."""
    fake_llm.queue(
        ToolCalls([ToolCall("send_message", {"to": "bob", "text": "hi"}, id="call_a")]),
        ToolCalls([ToolCall("send_email", EMAIL, id="call_b")]),
        then,
    )
    turn = turn_start(session=session, message="message bob, then email him")
    run_hearing(turn, [].append)
    assert turn.status == "awaiting_approval"
    answer(turn, True, resume=False)  # the continuation is this test's to run
    return turn


def test_a_continuation_stopped_while_it_runs_keeps_the_calls_from_before_its_pause(
    fake_llm, session, tools
):
    """The continuation's stream never sees the first batch (it ran in the attempt that
    paused): its call and result come from the saved pause, before the batch it replays."""
    turn = paused_after_a_call(fake_llm, session, Reply(LONG, delay=0.3))

    run_hearing(turn, stop_on(turn, "message.delta"))  # the continuation, as a worker runs it

    assert turn.status == "cancelled"
    assert rows(session) == [
        ("user", "message bob, then email him"),
        ("assistant", ""),
        ("tool", "send_message"),
        ("assistant", ""),
        ("tool", "send_email"),
        ("assistant", "word0 "),
    ]
    assert custom_tools.SENT == ["bob: hi"]
    assert approval_tools.SENT == [("bob@example.com", "hello")]
    reply = branch_history(current_branch(session))[-1]
    assert stopped_line(reply.metadata) == "Stopped: send_message, send_email ran"
    assert sorted(
        LedgerEntry.objects.filter(session=session).values_list("tool_name", "status")
    ) == [
        ("send_email", "ran"),
        ("send_message", "ran"),
    ]
    assert turn.tools_used == ["send_message", "send_email"]


def test_a_continuation_that_fails_records_the_calls_from_before_its_pause(
    fake_llm, session, tools
):
    """Its messages go with the failed turn, but both calls ran: the ledger keeps both."""
    turn = paused_after_a_call(fake_llm, session, Error(400, "bad request"))

    run_hearing(turn, [].append)

    assert turn.status == "failed"
    assert rows(session) == [("user", "message bob, then email him")]
    assert sorted(
        LedgerEntry.objects.filter(session=session).values_list("tool_name", "status")
    ) == [
        ("send_email", "ran"),
        ("send_message", "ran"),
    ]


def test_stop_twice_keeps_one_stopped_reply(fake_llm, session, tools):
    fake_llm.queue(Reply(LONG, delay=0.2))
    turn = turn_start(session=session, message="a long story")
    seen: list[dict] = []

    def twice(event: dict) -> None:
        seen.append(event)
        if event["type"] == "message.delta" and len(seen) == 2:
            turn_cancel(turn=Turn.objects.get(pk=turn.pk))
            turn_cancel(turn=Turn.objects.get(pk=turn.pk))

    run_hearing(turn, twice)
    assert turn.status == "cancelled"
    assert [e["type"] for e in seen].count("turn.cancelled") == 1
    stored = branch_history(current_branch(session))
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[-1].metadata["stopped"] is True


def test_a_stopped_turn_with_nothing_said_can_be_regenerated(fake_llm, session, tools):
    turn = turn_start(session=session, message="go")
    turn_cancel(turn=turn)  # before any worker took it
    stopped = branch_history(current_branch(session))[-1]
    assert stopped_line(stopped.metadata) == "Stopped before the reply"

    fake_llm.queue(Reply("Going."))
    again = turn_regenerate(session=session, message_id=stopped.pk)
    # turn_regenerate hands the turn to a worker after commit (the embedded pool here); run it
    # here too, in case none took it: one of the two claims it, the other does nothing.
    run_hearing(again, [].append)
    until(lambda: Turn.objects.get(pk=again.pk).status == "done", "the regenerated turn's end")
    assert rows(session) == [("user", "go"), ("assistant", "Going.")]
    sent = [m for m in fake_llm.messages(-1) if m["role"] != "system"]
    assert [m["content"] for m in sent] == ["go"]
