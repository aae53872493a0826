"""The ledger told to the model: after a restore that left external effects behind, the next
turns' instructions name them (tool, arguments, when) and ask the model not to repeat them
unasked; before the restore, and on a branch whose restore left nothing behind, no such note."""

from __future__ import annotations

import pytest

from agents.context import LEDGER_NOTE_ARGS_CHARS, LEDGER_NOTE_EFFECTS, left_behind_note
from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import Branch, LedgerEntry, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.turns import turn_cancel, turn_start
from tests.agents import custom_tools
from tests.conftest import ask, run_hearing
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.waits import until

pytestmark = pytest.mark.django_db(transaction=True)


def system_prompt(server) -> str:
    first = server.messages(-1)[0]
    assert first["role"] == "system"
    return first["content"]


@pytest.fixture
def sent_then_restored(fake_llm, session, settings):
    """A session that checkpointed, then sent a message outside (an external effect)."""
    settings.AGENT_TOOLS = ["tests.agents.custom_tools.send_message"]
    fake_llm.queue(Reply("Hello."))
    ask(session, "hi")
    start = checkpoint_create(branch=current_branch(session), name="start")
    fake_llm.queue(
        ToolCalls([ToolCall("send_message", {"to": "bob", "text": "the launch is on"})]),
        Reply("Sent."),
    )
    ask(session, "tell bob the launch is on")
    assert "<left_behind>" not in system_prompt(fake_llm)
    fake_llm.queue(Reply("Anything else?"))
    ask(session, "thanks")
    assert "<left_behind>" not in system_prompt(fake_llm)
    return start


@pytest.mark.parametrize("mode", ["branch", "rewind"])
def test_after_a_restore_the_model_is_told_the_external_effects_it_left_behind(
    fake_llm, session, sent_then_restored, mode
):
    result = checkpoint_restore(checkpoint=sent_then_restored, session=session, mode=mode)
    assert [m.tool_name for m in result.irreversible] == ["send_message"]
    fake_llm.queue(Reply("Where were we?"))
    ask(session, "where were we?")
    prompt = system_prompt(fake_llm)
    assert "<left_behind>" in prompt
    note = prompt.split("<left_behind>", 1)[1].split("</left_behind>", 1)[0]
    assert "send_message" in note
    assert "the launch is on" in note
    assert "Do not do them again unless the user asks you to." in note
    assert " UTC" in note  # when it happened
    # And on the turns after it, on that branch.
    fake_llm.queue(Reply("Still here."))
    ask(session, "and now?")
    assert "send_message" in system_prompt(fake_llm)


def test_a_restore_that_left_nothing_external_behind_adds_no_note(fake_llm, session):
    fake_llm.queue(Reply("Hello."))
    ask(session, "hi")
    start = checkpoint_create(branch=current_branch(session), name="start")
    fake_llm.queue(ToolCalls([ToolCall("calculate", {"expression": "1+1"})]), Reply("2"))
    ask(session, "calculate 1+1")
    checkpoint_restore(checkpoint=start, session=session)
    fake_llm.queue(Reply("Yes?"))
    ask(session, "hello again")
    assert "<left_behind>" not in system_prompt(fake_llm)


def test_the_note_is_bounded_keeping_the_newest_effects(session):
    entries = [
        {
            "message": i,
            "tool_name": f"tool_{i}",
            "args": {"text": "x" * 1000},
            "result": "ok",
            "created_at": "2026-11-26T01:02:03+00:00",
        }
        for i in range(30)
    ]
    branch = Branch(session=session, metadata={"left_behind": entries})
    note = left_behind_note(branch)
    assert note is not None
    lines = [line for line in note.splitlines() if line.startswith("- ")]
    assert lines[0] == f"- (and {30 - LEDGER_NOTE_EFFECTS} earlier ones)"
    assert [line.split()[1] for line in lines[1:]] == [f"tool_{i}" for i in range(20, 30)]
    assert all(len(line) < LEDGER_NOTE_ARGS_CHARS + 80 for line in lines)
    assert lines[-1].endswith("… at 2026-11-26 01:02:03 UTC")
    assert len(note) < 3_000


def test_no_note_without_a_ledger_or_with_a_malformed_one(session):
    assert left_behind_note(Branch(session=session, metadata={})) is None
    assert left_behind_note(Branch(session=session, metadata={"left_behind": "x"})) is None
    assert left_behind_note(Branch(session=session, metadata={"left_behind": [1]})) is None


def test_every_restore_lists_every_call_that_ran_past_it_and_the_model_is_told_them_all(
    fake_llm, session, settings
):
    """Issue 36: a call, a rewind, a second call (beside one that never ran), a second rewind,
    a restore as a branch, then a Stop during a third call on that branch and a rewind past
    it. Each restore lists every call that ran past the checkpoint, those of the part an earlier
    rewind cut included, and the stopped one as one that may have run; the model is told of
    all three (the branch inherits what its restore left behind); the ledger holds every call."""
    settings.AGENT_TOOLS = [
        "tests.agents.custom_tools.send_message",
        "tests.agents.custom_tools.slow_send",
    ]
    custom_tools.RELEASE.clear()
    fake_llm.queue(Reply("Hello."))
    ask(session, "hi")
    start = checkpoint_create(branch=current_branch(session), name="start")

    def tell(text: str, *also: ToolCall) -> None:
        fake_llm.queue(
            ToolCalls([ToolCall("send_message", {"to": "bob", "text": text}), *also]),
            Reply("Sent."),
        )
        assert ask(session, f"tell bob {text}").status == "done"

    def restore(mode: str, checkpoint=start) -> list[str]:
        result = checkpoint_restore(checkpoint=checkpoint, session=session, mode=mode)
        return [m.tool_args["text"] for m in result.irreversible]

    tell("first")
    assert restore("rewind") == ["first"]
    tell("second", ToolCall("no_such_tool", {}))  # that one never ran
    assert restore("rewind") == ["first", "second"]
    assert restore("branch") == ["first", "second"]
    fork = checkpoint_create(branch=current_branch(session), name="fork")
    fake_llm.queue(
        ToolCalls([ToolCall("slow_send", {"to": "bob", "text": "third"})]),
        Reply("Sent."),
    )
    third = turn_start(session=session, message="tell bob third")
    run_hearing(third, stop_when_started(third))
    assert third.status == "cancelled"
    custom_tools.RELEASE.set()  # the abandoned call goes on to its end, within the test
    until(lambda: "bob: third" in custom_tools.SENT, "the abandoned call to end")
    # Past "fork", the stopped call, on record as one that may have run; the first two were
    # already behind that point (the restore that made the branch left them there).
    assert restore("rewind", fork) == ["third"]
    fake_llm.queue(Reply("Where were we?"))
    ask(session, "where were we?")
    note = system_prompt(fake_llm).split("<left_behind>", 1)[1].split("</left_behind>", 1)[0]
    assert "first" in note
    assert "second" in note
    assert "third" in note
    assert "no_such_tool" not in note
    entries = LedgerEntry.objects.filter(session=session)
    assert sorted((e.tool_name, e.status) for e in entries) == [
        ("no_such_tool", "failed"),
        ("send_message", "ran"),
        ("send_message", "ran"),
        ("slow_send", "may_have_run"),
    ]


def stop_when_started(turn: Turn):
    """An event listener that stops `turn` (as Stop does from another tab) once a tool starts."""

    def on_event(event: dict) -> None:
        if event["type"] == "tool.started":
            turn_cancel(turn=Turn.objects.get(pk=turn.pk))

    return on_event


def test_a_rewind_keeps_what_an_earlier_rewind_left_behind(fake_llm, session, settings):
    """The branch's record of what its restores left behind is extended, never replaced: after
    a rewind to a later point, the calls an earlier rewind to an earlier point left behind are
    still named to the model."""
    settings.AGENT_TOOLS = ["tests.agents.custom_tools.send_message"]
    fake_llm.queue(Reply("Hello."))
    ask(session, "hi")
    start = checkpoint_create(branch=current_branch(session), name="start")
    fake_llm.queue(
        ToolCalls([ToolCall("send_message", {"to": "bob", "text": "early"})]), Reply("Sent.")
    )
    ask(session, "tell bob early")
    checkpoint_restore(checkpoint=start, session=session, mode="rewind")
    fake_llm.queue(Reply("Fine."))
    ask(session, "go on")
    later = checkpoint_create(branch=current_branch(session), name="later")
    fake_llm.queue(
        ToolCalls([ToolCall("send_message", {"to": "bob", "text": "late"})]), Reply("Sent.")
    )
    ask(session, "tell bob late")
    result = checkpoint_restore(checkpoint=later, session=session, mode="rewind")
    assert [m.tool_args["text"] for m in result.irreversible] == ["late"]
    kept = current_branch(session).metadata["left_behind"]
    assert [e["args"]["text"] for e in kept] == ["early", "late"]
    fake_llm.queue(Reply("Yes?"))
    ask(session, "and now?")
    note = system_prompt(fake_llm)
    assert "early" in note
    assert "late" in note


def test_a_call_of_a_stopped_turn_stays_on_record_and_the_next_restore_lists_it(
    fake_llm, session, settings
):
    """Issue 36: a turn stopped after its external call ran keeps its tool message; its ledger
    entry names that message, and a restore past it lists it."""
    from sessions_app.models import Turn
    from sessions_app.turns import turn_cancel, turn_start

    settings.AGENT_TOOLS = ["tests.agents.custom_tools.send_message"]
    fake_llm.queue(Reply("Hello."))
    ask(session, "hi")
    start = checkpoint_create(branch=current_branch(session), name="start")
    fake_llm.queue(
        ToolCalls([ToolCall("send_message", {"to": "bob", "text": "stopped"}, id="call_s")]),
        Reply(" ".join(f"word{i}" for i in range(40)), delay=0.2),  # 8 s, stopped long before
    )
    turn = turn_start(session=session, message="tell bob, then tell me a long story")

    def stop_once_sent(event: dict) -> None:  # as Stop does, from another tab
        if event["type"] == "tool.finished":
            turn_cancel(turn=Turn.objects.get(pk=turn.pk))

    run_hearing(turn, stop_once_sent)
    assert turn.status == "cancelled"
    (tool,) = [m for m in branch_history(current_branch(session)) if m.role == "tool"]
    (entry,) = LedgerEntry.objects.filter(session=session)
    assert (entry.tool_name, entry.status, entry.turn_ref) == ("send_message", "ran", turn.pk)
    assert entry.message_ref == tool.pk
    assert entry.tool_args == {"to": "bob", "text": "stopped"}

    result = checkpoint_restore(checkpoint=start, session=session, mode="rewind")
    assert [(m.tool_name, m.tool_args["text"]) for m in result.irreversible] == [
        ("send_message", "stopped")
    ]
