"""The agent's file and plan tools called as seed 003's agent calls them outside a turn: what they
answer, what they write, and that every refusal is a "✗" answer that writes nothing."""

from __future__ import annotations

import pytest

from agents.demo_model import DemoModel
from agents.file_tools import READ_FILE_CHARS, TODO_MAX, TODO_TITLE_CHARS
from agents.rollback_agent import RollbackAgent
from agents.turn.claim import Heartbeat
from sessions_app.models import Branch
from sessions_app.turns import turn_cancel, turn_start
from workspace.models import FileVersion
from workspace.selectors import workspace_file, workspace_files
from workspace.services import file_write

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(session, branch):
    return RollbackAgent(
        external_session_id=session.pk, model=DemoModel(), skip_session_creation=True
    )


def paths(branch: Branch) -> list[str]:
    return [f.path for f in workspace_files(branch)]


# --- files -----------------------------------------------------------------------------------


def test_write_file_creates_then_updates_a_file_of_the_agents_branch(agent, branch):
    assert agent.write_file("notes.md", "hello") == "✓ Created notes.md (5 bytes)."
    assert agent.write_file("notes.md", "hello again") == "✓ Updated notes.md (11 bytes)."
    file, content = workspace_file(branch, "notes.md")
    assert content == "hello again"
    version = FileVersion.objects.get(pk=file.version)
    assert version.metadata["by"] == "agent"
    assert version.turn is None  # outside a turn: in no turn's name


def test_read_file_returns_the_content_at_once_after_a_write(agent):
    agent.write_file("docs/plan.md", "# Plan\n- one\n")
    assert agent.read_file("docs/plan.md") == "# Plan\n- one\n"


def test_read_file_cuts_a_long_file_and_says_so(agent):
    agent.write_file("big.txt", "x" * (READ_FILE_CHARS + 500))
    shown = agent.read_file("big.txt")
    assert shown.startswith("x" * READ_FILE_CHARS + "\n[… cut here")
    assert f"{READ_FILE_CHARS + 500:,} characters" in shown
    assert len(shown) < READ_FILE_CHARS + 200


def test_list_dir_shows_folders_with_a_slash_and_files_with_sizes(agent):
    assert agent.list_dir() == "The workspace is empty."
    agent.write_file("README.md", "hi")
    agent.write_file("docs/a.md", "aaa")
    agent.write_file("docs/deep/b.md", "b")
    assert agent.list_dir() == "Files in the workspace:\ndocs/ (2 files)\nREADME.md (2 bytes)"
    assert agent.list_dir("docs") == "Files in docs/:\ndeep/ (1 file)\na.md (3 bytes)"
    assert agent.list_dir("docs/deep/") == "Files in docs/deep/:\nb.md (1 byte)"


def test_list_dir_of_a_missing_folder_or_a_file_is_a_refusal(agent):
    agent.write_file("README.md", "hi")
    assert agent.list_dir("nowhere").startswith("✗ No folder 'nowhere'")
    assert agent.list_dir("README.md").startswith("✗ 'README.md' is a file")
    assert agent.list_dir("../up").startswith("✗ ")


def test_delete_file_removes_it_and_a_missing_file_is_a_refusal(agent, branch):
    agent.write_file("notes.md", "hello")
    assert agent.delete_file("notes.md") == "✓ Deleted notes.md."
    assert paths(branch) == []
    assert agent.read_file("notes.md").startswith("✗ No file 'notes.md'")
    assert agent.delete_file("notes.md").startswith("✗ No file 'notes.md'")


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("../escape.md", "x"),
        ("/etc/passwd", "x"),
        ("a\x00b.md", "x"),
        ("", "x"),
        ("x" * 121 + ".md", "x"),
        ("ok.md", "binary\x00content"),
        ("ok.md", None),
    ],
)
def test_bad_input_is_a_refusal_the_model_reads_and_nothing_is_written(
    agent, branch, path, content
):
    before = FileVersion.objects.count()
    answer = agent.write_file(path, content)
    assert answer.startswith("✗ ")
    assert FileVersion.objects.count() == before
    assert paths(branch) == []


def test_a_file_over_the_size_limit_is_refused(agent, branch, settings):
    settings.WORKSPACE_MAX_FILE_BYTES = 100
    answer = agent.write_file("big.md", "x" * 101)
    assert answer.startswith("✗ The file is 101 bytes")
    assert paths(branch) == []


def test_a_new_file_past_the_file_limit_is_refused_but_an_existing_one_may_change(
    agent, branch, settings
):
    settings.WORKSPACE_MAX_FILES = 2
    agent.write_file("a.md", "a")
    agent.write_file("b.md", "b")
    assert agent.write_file("c.md", "c").startswith("✗ This workspace already holds 2 files")
    assert agent.write_file("a.md", "changed").startswith("✓ Updated")
    assert paths(branch) == ["a.md", "b.md"]


def test_a_file_where_a_folder_is_is_refused(agent, branch):
    agent.write_file("docs/a.md", "a")
    assert agent.write_file("docs", "x").startswith("✗ 'docs' is a folder")
    assert paths(branch) == ["docs/a.md"]


def test_the_tools_of_a_turn_that_was_stopped_write_nothing(agent, session, branch):
    turn = turn_start(session=session, message="write it")
    turn_cancel(turn=turn)
    with agent.attempt(turn, hold=Heartbeat(turn)):  # as the pipeline runs it
        answer = agent.write_file("notes.md", "late")
        assert answer.startswith("✗ This turn was stopped or taken over")
        assert agent.delete_file("notes.md").startswith("✗ ")
    assert paths(branch) == []
    # Its attempt over, the agent writes in no turn's name again.
    assert agent.write_file("notes.md", "now").startswith("✓ Created")


def test_the_tools_read_only_their_own_branch(agent, session, branch):
    other = Branch.objects.create(session=session, name="other")
    file_write(branch=other, path="theirs.md", content="not yours")
    assert agent.read_file("theirs.md").startswith("✗ No file")
    assert agent.list_dir() == "The workspace is empty."


# --- the plan --------------------------------------------------------------------------------


def test_the_plan_lives_in_the_session_state_under_todos(agent):
    assert agent.get_todo() == "The todo list is empty."
    assert agent.create_todo("Buy milk") == "✓ Added todo 1: Buy milk"
    assert agent.create_todo("  Write   the README ") == "✓ Added todo 2: Write the README"
    assert agent.mark_todo_done(1) == "✓ Marked todo 1 done: Buy milk"
    assert agent.session_state["todos"] == [
        {"id": 1, "title": "Buy milk", "done": True},
        {"id": 2, "title": "Write the README", "done": False},
    ]
    assert agent.get_todo() == (
        "Todo list:\n1. [x] Buy milk\n2. [ ] Write the README\n1 of 2 done."
    )
    assert agent.mark_todo_done(1) == "Todo 1 was already done: Buy milk"


def test_the_plan_refuses_bad_todos_and_unknown_ids(agent):
    assert agent.create_todo("   ") == "✗ A todo needs a title."
    assert agent.create_todo("x" * (TODO_TITLE_CHARS + 1)).startswith("✗ A todo's title")
    assert agent.mark_todo_done(7).startswith("✗ No todo 7 in the plan")
    assert agent.mark_todo_done("seven").startswith("✗ A todo's id is a number")  # type: ignore[arg-type]
    assert agent.get_todo() == "The todo list is empty."


def test_the_plan_holds_at_most_its_limit(agent):
    for i in range(TODO_MAX):
        agent.create_todo(f"step {i}")
    assert agent.create_todo("one too many").startswith(f"✗ The plan already holds {TODO_MAX}")
    assert len(agent.session_state["todos"]) == TODO_MAX


def test_new_todo_ids_follow_the_highest_even_after_a_malformed_state(agent):
    agent.session_state = {"todos": [{"id": 4, "title": "kept"}, "junk", {"title": "no id"}]}
    assert agent.create_todo("next") == "✓ Added todo 5: next"
    assert [t["id"] for t in agent.session_state["todos"]] == [4, 5]
