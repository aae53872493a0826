"""The file and plan tools through real turns against the local Chat Completions server: a write
is visible to the next call at once, the automatic checkpoint covers it, a restore (either mode)
brings the files and the plan back, a failed turn's writes go with it, and a bad path is a "✗"
result the model reads."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from checkpoints.selectors import checkpoint_files
from checkpoints.services import checkpoint_restore
from sessions_app.models import Message
from sessions_app.selectors import branch_history, current_branch
from tests.conftest import ask
from tests.fakes.chat_server import Error, Reply, ToolCall, ToolCalls
from workspace.models import FileVersion
from workspace.selectors import workspace_file, workspace_files

pytestmark = pytest.mark.django_db(transaction=True)


def tool_messages(session) -> list[Message]:
    return [m for m in branch_history(current_branch(session)) if m.role == "tool"]


def files_of(branch) -> dict[str, str]:
    return {f.path: workspace_file(branch, f.path)[1] for f in workspace_files(branch)}


def write(path: str, content: str) -> ToolCalls:
    return ToolCalls([ToolCall("write_file", {"path": path, "content": content})])


def test_a_file_the_agent_writes_is_read_by_its_next_tool_call_at_once(fake_llm, session):
    fake_llm.queue(
        write("notes.md", "hello"),
        ToolCalls([ToolCall("read_file", {"path": "notes.md"})]),
        Reply("It says hello."),
    )
    turn = ask(session, "write notes.md saying hello, then read it")
    assert turn.status == "done", turn.error
    wrote, read = tool_messages(session)
    assert wrote.tool_result == "✓ Created notes.md (5 bytes)."
    assert read.tool_result == "hello"
    # The model got the file's content back as the second call's result.
    last = fake_llm.messages(-1)[-1]
    assert (last["role"], last["content"], last["tool_call_id"]) == (
        "tool",
        "hello",
        read.tool_call_id,
    )
    version = FileVersion.objects.get(path="notes.md")
    assert version.turn_id == turn.pk
    assert version.metadata["by"] == "agent"


def test_the_automatic_checkpoint_after_the_turn_covers_its_files(fake_llm, session):
    fake_llm.queue(write("notes.md", "v1"), Reply("Written."))
    turn = ask(session, "write notes.md saying v1")
    assert turn.checkpoint is not None
    assert turn.checkpoint.checkpoint_name == "after-write_file"
    assert [f.path for f in checkpoint_files(turn.checkpoint)] == ["notes.md"]


def test_only_a_turn_that_changed_something_ends_with_a_checkpoint_each_named_apart(
    fake_llm, session
):
    """Issue 36: a checkpoint after a read, a sum or a failed write restores nothing new, and
    four "after-write_file" in a picker cannot be told apart."""
    fake_llm.queue(write("notes.md", "v1"), Reply("Written."))
    first = ask(session, "write notes.md saying v1")
    fake_llm.queue(
        ToolCalls([ToolCall("read_file", {"path": "notes.md"})]),
        ToolCalls([ToolCall("calculate", {"expression": "6*7"})]),
        Reply("It says v1, and 42."),
    )
    reading = ask(session, "read notes.md and work out 6*7")
    fake_llm.queue(write("../escape.txt", "no"), Reply("That path is refused."))
    refused = ask(session, "write outside the workspace")
    fake_llm.queue(write("notes.md", "v2"), Reply("Changed."))
    second = ask(session, "write notes.md saying v2")

    assert [t.status for t in (first, reading, refused, second)] == ["done"] * 4
    assert (reading.checkpoint, refused.checkpoint) == (None, None)
    assert refused.tools_used == []  # the write did not run
    assert reading.tools_used == ["read_file", "calculate"]
    assert [c.checkpoint_name for c in Checkpoint.objects.order_by("id")] == [
        "after-write_file",
        "after-write_file (2)",
    ]
    assert [first.checkpoint_id, second.checkpoint_id] == list(
        Checkpoint.objects.order_by("id").values_list("id", flat=True)
    )


@pytest.mark.parametrize("mode", ["branch", "rewind"])
def test_a_restore_brings_back_the_files_as_the_checkpoint_had_them(fake_llm, session, mode):
    fake_llm.queue(write("notes.md", "v1"), Reply("Written."))
    first = ask(session, "write notes.md saying v1")
    fake_llm.queue(
        write("notes.md", "v2"),
        write("more.md", "new"),
        Reply("Changed."),
    )
    ask(session, "change it")
    assert files_of(current_branch(session)) == {"more.md": "new", "notes.md": "v2"}

    checkpoint = Checkpoint.objects.get(pk=first.checkpoint_id)
    restored = checkpoint_restore(checkpoint=checkpoint, session=session, mode=mode).branch
    assert files_of(restored) == {"notes.md": "v1"}
    assert current_branch(session).pk == restored.pk

    # The next turn's tools see the restored files.
    fake_llm.queue(ToolCalls([ToolCall("read_file", {"path": "notes.md"})]), Reply("v1 it is."))
    ask(session, "read notes.md")
    assert tool_messages(session)[-1].tool_result == "v1"


def test_a_failed_turns_writes_are_gone_with_it(fake_llm, session):
    fake_llm.queue(write("notes.md", "half done"), Error(500), Error(500), Error(500))
    turn = ask(session, "write notes.md then fail")
    assert turn.status == "failed"
    assert files_of(current_branch(session)) == {}


def test_the_plan_comes_back_with_a_restore(fake_llm, session):
    fake_llm.queue(ToolCalls([ToolCall("create_todo", {"title": "buy milk"})]), Reply("Added."))
    first = ask(session, "add a todo: buy milk")
    assert current_branch(session).session_state["todos"] == [
        {"id": 1, "title": "buy milk", "done": False}
    ]
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("create_todo", {"title": "bake bread"}),
                ToolCall("mark_todo_done", {"todo_id": 1}),
            ]
        ),
        Reply("Done and added."),
    )
    ask(session, "add bake bread and tick off the milk")
    assert [t["done"] for t in current_branch(session).session_state["todos"]] == [True, False]

    checkpoint = Checkpoint.objects.get(pk=first.checkpoint_id)
    restored = checkpoint_restore(checkpoint=checkpoint, session=session).branch
    assert restored.session_state["todos"] == [{"id": 1, "title": "buy milk", "done": False}]

    fake_llm.queue(ToolCalls([ToolCall("get_todo", {})]), Reply("One thing to do."))
    ask(session, "show my todo list")
    assert tool_messages(session)[-1].tool_result == ("Todo list:\n1. [ ] buy milk\n0 of 1 done.")


def test_a_bad_path_is_a_refusal_the_model_reads_and_the_turn_goes_on(fake_llm, session):
    fake_llm.queue(write("../outside.md", "x"), Reply("I cannot write there."))
    turn = ask(session, "write ../outside.md")
    assert turn.status == "done"
    (refused,) = tool_messages(session)
    assert refused.tool_result.startswith("✗ A file path cannot go up with '..'")
    # The tool answered with its refusal and did nothing: the call did not run to an end.
    assert refused.metadata == {"error": True}
    assert turn.tools_used == []
    assert turn.checkpoint is None
    sent = fake_llm.messages(-1)[-1]
    assert sent["role"] == "tool"
    assert sent["content"].startswith("✗ ")
    assert not FileVersion.objects.exists()


def test_a_checkpoint_taken_during_a_failed_turn_goes_with_the_writes_it_held(fake_llm, session):
    """The agent's checkpoint mid-turn shows the turn's writes so far; the failed turn loses
    them, so the checkpoint goes too (and is announced) rather than showing other files."""
    fake_llm.queue(write("kept.md", "before"), Reply("Written."))
    before = ask(session, "write kept.md")
    fake_llm.queue(
        write("notes.md", "half done"),
        ToolCalls([ToolCall("create_checkpoint", {"name": "halfway"})]),
        Error(500),
        Error(500),
        Error(500),
    )
    events: list = []
    turn = ask(session, "write notes.md, checkpoint, then fail", events)
    assert turn.status == "failed"
    assert files_of(current_branch(session)) == {"kept.md": "before"}
    assert not Checkpoint.objects.filter(checkpoint_name="halfway").exists()
    gone = [e for e in events if e["type"] == "checkpoint.deleted"]
    assert len(gone) == 1
    assert len(gone[0]["checkpoints"]) == 1
    # What the earlier turn's checkpoint shows is untouched, and the branch counts right.
    kept = Checkpoint.objects.get(pk=before.checkpoint_id)
    assert [f.path for f in checkpoint_files(kept)] == ["kept.md"]
    assert current_branch(session).checkpoint_count == Checkpoint.objects.count()
