"""The agent's file and plan tools called as seed 003's agent calls them outside a turn: what they
answer, what they write, and that every refusal is a "✗" answer that writes nothing."""

from __future__ import annotations

import base64

import pytest

from agents.demo_model import DemoModel
from agents.file_tools import READ_FILE_CHARS, TODO_MAX, TODO_TITLE_CHARS
from agents.rollback_agent import RollbackAgent
from agents.turn.claim import Heartbeat
from sessions_app.models import Branch, Message
from sessions_app.turns import turn_cancel, turn_start
from tests.agents.test_mcp_result_turns import image_urls
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.fakes.mcp_server import tiny_png
from tests.fakes.pdf import make_locked_pdf, make_pdf
from workspace import pdf_text
from workspace.models import FileVersion
from workspace.selectors import workspace_file, workspace_file_bytes, workspace_files
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


# --- PDFs: their text is read -----------------------------------------------------------------


def test_read_file_gives_a_pdfs_text_page_by_page(agent, branch):
    file_write(branch=branch, path="docs/report.pdf", content=make_pdf("Revenue (Q3)", "Costs"))
    shown = agent.read_file("docs/report.pdf")
    assert shown == "[The text of the PDF docs/report.pdf: 2 pages.]\nRevenue (Q3)\n\nCosts"


def test_a_long_pdf_is_cut_at_its_pages_or_characters_and_says_so(agent, branch, monkeypatch):
    monkeypatch.setattr(pdf_text, "MAX_PAGES", 2)
    file_write(branch=branch, path="long.pdf", content=make_pdf("one", "two", "three"))
    shown = agent.read_file("long.pdf")
    assert shown.startswith("[The text of the PDF long.pdf: 3 pages.]\none\n\ntwo\n")
    assert shown.endswith("[… cut here: only the first 2 pages were read.]")
    assert "three" not in shown

    wide = "x" * 90
    file_write(branch=branch, path="wide.pdf", content=make_pdf(*[wide] * 300))
    monkeypatch.setattr(pdf_text, "MAX_PAGES", 1000)
    shown = agent.read_file("wide.pdf")
    assert shown.endswith(f"[… cut here: only the first {READ_FILE_CHARS:,} characters are shown.]")
    assert len(shown) < READ_FILE_CHARS + 200


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (make_locked_pdf("secret plans", "pw"), "✗ 'bad.pdf' is a PDF locked with a password"),
        (
            b"%PDF-1.4\nthis is no PDF at all\x00\xff",
            "✗ 'bad.pdf' is a PDF whose text could not be read",
        ),
        (make_pdf("cut")[:60], "✗ 'bad.pdf' is a PDF whose text could not be read"),
        (b"\x00\x01\x02 not a PDF", "✗ 'bad.pdf' is a binary file (13 bytes), not text"),
    ],
)
def test_a_pdf_that_cannot_be_read_is_a_clear_refusal_and_stays(agent, branch, content, said):
    file_write(branch=branch, path="bad.pdf", content=content)
    assert agent.read_file("bad.pdf").startswith(said)
    assert workspace_file_bytes(branch, "bad.pdf")[1].raw == content  # kept, downloadable


def test_a_scanned_pdf_without_text_says_so(agent, branch):
    file_write(branch=branch, path="scan.pdf", content=make_pdf(""))
    assert agent.read_file("scan.pdf") == (
        "[The text of the PDF scan.pdf: 1 page. It has no text to extract (scanned pages are "
        "images).]"
    )


def test_the_model_reads_an_attached_pdf_in_a_turn(fake_llm, session, branch):
    file_write(
        branch=branch, path="paper.pdf", content=make_pdf("Attention is all you need"), by="user"
    )
    fake_llm.queue(ToolCalls([ToolCall("read_file", {"path": "paper.pdf"})]), Reply("Read it."))
    turn = ask(session, "what does paper.pdf say?")
    [tool] = Message.objects.filter(branch_id=turn.branch_id, role="tool")
    assert "Attention is all you need" in tool.content
    sent = [m for m in fake_llm.messages(-1) if m["role"] == "tool"]
    assert "Attention is all you need" in sent[0]["content"]


# --- images: shown to a model that takes them -------------------------------------------------


def test_an_image_file_reaches_a_vision_model_and_stays_with_its_result(
    fake_llm, session, branch, settings
):
    settings.AGENT_VISION_MODELS = ["fake-*"]
    file_write(branch=branch, path="shots/red.png", content=tiny_png(), by="user")
    fake_llm.queue(ToolCalls([ToolCall("read_file", {"path": "shots/red.png"})]), Reply("Red."))
    turn = ask(session, "what is in shots/red.png?")

    sent = fake_llm.messages(-1)
    [tool_at] = [i for i, m in enumerate(sent) if m["role"] == "tool"]
    assert sent[tool_at]["content"].startswith("[The image shots/red.png, attached after")
    assert sent[tool_at + 1]["role"] == "user"  # agno's carrier of a tool's images
    assert image_urls([sent[tool_at + 1]]) == [
        "data:image/png;base64," + base64.b64encode(tiny_png()).decode()
    ]
    [tool] = Message.objects.filter(branch_id=turn.branch_id, role="tool")
    [stored] = tool.metadata["images"]  # the page shows it with the call; a later turn sends it
    assert base64.b64decode(stored["data"]) == tiny_png()
    assert stored["mime"] == "image/png"


def test_a_model_that_takes_no_images_is_told_so(fake_llm, session, branch, settings):
    settings.AGENT_VISION_MODELS = ["gpt-4o*"]
    file_write(branch=branch, path="red.png", content=tiny_png(), by="user")
    fake_llm.queue(ToolCalls([ToolCall("read_file", {"path": "red.png"})]), Reply("Sorry."))
    turn = ask(session, "look at red.png")

    assert image_urls(fake_llm.messages(-1)) == []
    [tool] = Message.objects.filter(branch_id=turn.branch_id, role="tool")
    assert tool.content.startswith("✗ 'red.png' is an image (image/png, ")
    assert "this model does not take images" in tool.content
    assert not tool.metadata.get("images")


def test_an_image_over_the_models_bound_is_refused(session, branch, settings, monkeypatch):
    from agno.models.openai import OpenAIChat

    from agents.mcp import vision

    monkeypatch.setattr(vision, "MAX_IMAGE_BYTES", 10)
    settings.AGENT_VISION_MODELS = ["gpt-4o*"]
    model = OpenAIChat(id="gpt-4o", api_key="unused")  # never called: read_file is
    agent = RollbackAgent(external_session_id=session.pk, model=model, skip_session_creation=True)
    file_write(branch=branch, path="big.png", content=tiny_png())
    shown = agent.read_file("big.png")
    assert shown.startswith("✗ 'big.png' is an image (image/png, ")
    assert "larger than the 10 bytes a model is shown" in shown


def test_images_attached_to_a_message_go_with_it_to_a_vision_model(
    fake_llm, session, branch, settings
):
    settings.AGENT_VISION_MODELS = ["fake-*"]
    file_write(branch=branch, path="red.png", content=tiny_png(), by="user")
    file_write(branch=branch, path="notes.txt", content="not an image", by="user")
    fake_llm.queue(Reply("A red square."))
    ask(session, "What is this?\nAttached: `red.png`, `notes.txt`, `gone.png`")

    sent = fake_llm.messages(-1)[-1]
    assert sent["role"] == "user"
    assert sent["content"][0] == {
        "type": "text",
        "text": "What is this?\nAttached: `red.png`, `notes.txt`, `gone.png`",
    }
    assert image_urls([sent]) == ["data:image/png;base64," + base64.b64encode(tiny_png()).decode()]


def test_a_model_that_takes_no_images_gets_the_attached_line_only(
    fake_llm, session, branch, settings
):
    settings.AGENT_VISION_MODELS = ["gpt-4o*"]
    file_write(branch=branch, path="red.png", content=tiny_png(), by="user")
    fake_llm.queue(Reply("I cannot see it."))
    ask(session, "What is this?\nAttached: `red.png`")
    assert fake_llm.messages(-1)[-1]["content"] == "What is this?\nAttached: `red.png`"


def test_only_the_first_names_of_an_attached_line_are_looked_at(
    branch, django_assert_max_num_queries
):
    from agents.mcp.vision import MAX_ATTACHED_NAMES, attached_images

    file_write(branch=branch, path="late.png", content=tiny_png(), by="user")
    many = ", ".join(f"`missing-{i}.png`" for i in range(100))
    with django_assert_max_num_queries(2 * MAX_ATTACHED_NAMES):
        assert attached_images(branch, f"Look\nAttached: {many}, `late.png`") == []
    assert len(attached_images(branch, "Attached: `late.png`")) == 1
