"""The sandboxed shell through real turns: the offline demo model's "run ..." and "run the tests",
a scripted Chat Completions server's run_shell call, what a command changes kept as the turn's
write (the automatic checkpoint covers it, a restore undoes it), and the tools left out where
the sandbox is not available."""

from __future__ import annotations

import json
import time

import pytest

from agents.demo_model import DemoModel
from agents.rollback_agent import RollbackAgent
from checkpoints.services import checkpoint_create, checkpoint_restore
from sandbox import availability
from sessions_app.models import Message
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import session_update
from sessions_app.turns import turn_start
from tests.conftest import ask, run_hearing
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from workspace.models import FileVersion
from workspace.selectors import workspace_file, workspace_file_bytes, workspace_files
from workspace.services import file_write

pytestmark = pytest.mark.django_db(transaction=True)


SORT = "sort data/in.txt > data/sorted.txt && rm data/in.txt"


def files_of(branch) -> dict[str, str]:
    return {f.path: workspace_file(branch, f.path)[1] for f in workspace_files(branch)}


def tool_messages(session) -> list[Message]:
    return [m for m in branch_history(current_branch(session)) if m.role == "tool"]


def test_the_demo_runs_a_command_and_shows_its_output_as_a_terminal_block(demo, session):
    turn = ask(session, "run python3 -c 'print(2+2)'")
    assert turn.status == "done", turn.error
    assert turn.tools_used == ["run_shell"]
    (message,) = tool_messages(session)
    assert message.effect == "workspace"
    result = json.loads(message.tool_result)
    assert (result["exit_code"], result["stdout"], result["ended"]) == (0, "4\n", "exited")
    assert "```console\n$ python3 -c 'print(2+2)'\n4\n```" in turn.reply
    assert "Exit code 0." in turn.reply


def test_write_run_break_restore_run_again_with_the_demo(demo, session):
    """The README's walk-through: a script written, run, checkpointed, broken by a command,
    restored, and run again as it was."""
    ask(session, "write main.py saying print('hello from main')")
    ran = ask(session, "run python3 main.py > out.txt")
    branch = current_branch(session)
    assert files_of(branch)["out.txt"] == "hello from main\n"
    assert ran.checkpoint is not None  # its change is the turn's write: checkpointed after it
    good = ran.checkpoint
    broke = ask(session, "run echo 'raise SystemExit(3)' > main.py && rm out.txt")
    assert broke.status == "done", broke.error
    assert set(files_of(current_branch(session))) == {"main.py"}
    failed = ask(session, "run python3 main.py")
    assert json.loads(tool_messages(session)[-1].tool_result)["exit_code"] == 3
    assert "Exit code 3." in failed.reply
    checkpoint_restore(checkpoint=good, mode="rewind")
    assert files_of(current_branch(session)) == {
        "main.py": "print('hello from main')",
        "out.txt": "hello from main\n",
    }
    again = ask(session, "run python3 main.py")
    assert json.loads(tool_messages(session)[-1].tool_result)["stdout"] == "hello from main\n"
    assert again.status == "done"


def test_run_the_tests_runs_the_sessions_test_command_or_says_how_to_set_it(demo, session):
    turn = ask(session, "run the tests")
    assert tool_messages(session)[-1].tool_result.startswith("✗ This session has no test command")
    assert "test command" in turn.reply
    ask(session, "write test_sum.py saying assert sum([1, 2]) == 3; print('1 passed')")
    metadata = dict(session.metadata)
    metadata["settings"] = {**metadata.get("settings", {}), "test_command": "python3 test_sum.py"}
    session_update(session=session, metadata=metadata)
    turn = ask(session, "run the tests")
    assert turn.tools_used == ["run_tests"]
    result = json.loads(tool_messages(session)[-1].tool_result)
    assert (result["command"], result["exit_code"], result["stdout"]) == (
        "python3 test_sum.py",
        0,
        "1 passed\n",
    )


def test_a_scripted_models_run_shell_changes_become_the_turns_versions_and_a_restore_undoes_them(
    fake_llm, session
):
    branch = current_branch(session)
    file_write(branch=branch, path="data/in.txt", content="b\na\nc\n")
    before = checkpoint_create(branch=current_branch(session), name="before")
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall(
                    "run_shell", {"command": "sort data/in.txt > data/sorted.txt && rm data/in.txt"}
                )
            ]
        ),
        Reply("Sorted."),
    )
    turn = ask(session, "sort the data")
    assert turn.status == "done", turn.error
    after = files_of(current_branch(session))
    assert after == {"data/sorted.txt": "a\nb\nc\n"}
    versions = FileVersion.objects.filter(turn=turn).order_by("path")
    assert [(v.path, v.blob_id is None, v.metadata["tool"]) for v in versions] == [
        ("data/in.txt", True, "run_shell"),
        ("data/sorted.txt", False, "run_shell"),
    ]
    result = json.loads(tool_messages(session)[-1].tool_result)
    assert (result["changed_files"], result["deleted_files"]) == (
        ["data/sorted.txt"],
        ["data/in.txt"],
    )
    # The model got the JSON result as the call's answer.
    assert json.loads(fake_llm.messages(-1)[-1]["content"])["changed_files"] == ["data/sorted.txt"]
    assert turn.checkpoint is not None
    assert turn.checkpoint.checkpoint_name == "after-run_shell"
    checkpoint_restore(checkpoint=before, mode="branch")
    assert files_of(current_branch(session)) == {"data/in.txt": "b\na\nc\n"}
    assert files_of(branch) == after  # the branch it came from keeps the command's change


def test_without_a_sandbox_the_shell_tools_are_not_offered(settings, session, fake_llm):
    settings.SANDBOX = "off"
    assert not availability.availability().ok
    assert "SANDBOX=off" in availability.availability().why
    agent = RollbackAgent(external_session_id=session.pk, model=DemoModel())
    names = {getattr(t, "__name__", "") for t in agent.tools}
    assert not names & {"run_shell", "run_tests"}
    assert "write_file" in names
    fake_llm.queue(Reply("Hi."))
    ask(session, "hello")
    offered = {t["function"]["name"] for t in fake_llm.requests[-1]["tools"]}
    assert "run_shell" not in offered
    assert "list_dir" in offered
    settings.SANDBOX = "auto"
    assert availability.availability().ok


def test_a_binary_file_a_command_writes_is_kept_and_the_next_run_sees_it_byte_for_byte(
    fake_llm, session
):
    make = "python3 -c \"open('out.bin','wb').write(bytes(range(256)))\""
    check = "python3 -c \"print(open('out.bin','rb').read() == bytes(range(256)))\""
    fake_llm.queue(
        ToolCalls([ToolCall("run_shell", {"command": make})]),
        ToolCalls([ToolCall("run_shell", {"command": check})]),
        ToolCalls([ToolCall("read_file", {"path": "out.bin"})]),
        Reply("Done."),
    )
    turn = ask(session, "make a binary file and check it")
    assert turn.status == "done", turn.error
    made, checked, read = tool_messages(session)
    assert json.loads(made.tool_result)["changed_files"] == ["out.bin"]
    assert json.loads(checked.tool_result)["stdout"] == "True\n"
    assert read.tool_result.startswith("✗ 'out.bin' is a binary file (256 bytes)")
    found, content = workspace_file_bytes(current_branch(session), "out.bin")
    assert (found.binary, content.raw) == (True, bytes(range(256)))


def ask_timed(session, text: str, heard: list):
    """ask(), each event heard with the time it was heard."""
    turn = turn_start(session=session, message=text)
    run_hearing(turn, lambda event: heard.append((time.monotonic(), event)))
    return turn


def test_a_runs_output_streams_as_tool_output_events_while_it_runs(fake_llm, session):
    command = (
        "echo first; sleep 1.5; echo second >&2; printf 'caf\\303'; sleep 0.5; printf '\\251\\n'"
    )
    fake_llm.queue(ToolCalls([ToolCall("run_shell", {"command": command})]), Reply("Done."))
    heard: list[tuple[float, dict]] = []
    turn = ask_timed(session, "run it", heard)
    assert turn.status == "done", turn.error

    pieces = [(at, e) for at, e in heard if e["type"] == "tool.output"]
    [finished_at] = [at for at, e in heard if e["type"] == "tool.finished"]
    assert {e["turn"] for _, e in pieces} == {turn.pk}
    assert {e["tool"] for _, e in pieces} == {"run_shell"}
    assert len({e["run"] for _, e in pieces}) == 1  # one run, one id
    # In order, each piece after the ones before it, nothing lost or doubled.
    offsets = [e["offset"] for _, e in pieces]
    texts = [e["text"] for _, e in pieces]
    assert offsets == [sum(len(t) for t in texts[:i]) for i in range(len(texts))]
    assert "".join(texts) == "first\nsecond\ncafé\n"  # a character split between reads is whole
    # "first" was shown long before the run ended.
    first_at = next(at for at, e in pieces if "first" in e["text"])
    assert finished_at - first_at > 1.0
    result = json.loads(tool_messages(session)[-1].tool_result)
    assert (result["stdout"], result["stderr"]) == ("first\ncafé\n", "second\n")


def test_a_runs_output_is_shown_live_only_within_its_bound(fake_llm, session, settings):
    settings.SANDBOX_MAX_OUTPUT_BYTES = 1000
    fake_llm.queue(
        ToolCalls([ToolCall("run_shell", {"command": "yes | head -c 5000000"})]), Reply("Lots.")
    )
    heard: list = []
    turn = ask(session, "flood", events=heard)
    assert turn.status == "done", turn.error
    shown = "".join(e["text"] for e in heard if e["type"] == "tool.output")
    assert shown == "y\n" * 500  # the kept 1,000 bytes, no more
