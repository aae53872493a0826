"""The offline demo model: on its own with agno messages, and through the product (a whole turn
run by the agent the web and API turns use, stored in the database)."""

from __future__ import annotations

import json

import pytest
from agno.models.message import Message as AgnoMessage

from agents.demo_model import DEMO_MODEL_ID, DemoModel
from agents.model import build_model
from agents.rollback_agent import RollbackAgent, auto_checkpoint_enabled
from checkpoints.models import Checkpoint
from sessions_app.models import Branch, Turn
from sessions_app.selectors import branch_history, current_branch
from tests.conftest import contents, say

pytestmark = pytest.mark.django_db

TOOL_NAMES = [
    "calculate",
    "create_checkpoint",
    "list_checkpoints_tool",
    "rollback_to_checkpoint_tool",
    "delete_checkpoint_tool",
    "get_checkpoint_info_tool",
    "cleanup_auto_checkpoints_tool",
]


def tools(*names: str) -> list[dict]:
    """Tools in the OpenAI function format, as agno hands them to the model."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"The {name} tool.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
        for name in names
    ]


ALL_TOOLS = tools(*TOOL_NAMES)


def user(text: str) -> AgnoMessage:
    return AgnoMessage(role="user", content=text)


def ask(messages: list[AgnoMessage], offered: list[dict] | None = ALL_TOOLS, model=None):
    model = model or DemoModel()
    return model.invoke(messages, AgnoMessage(role="assistant"), tools=offered)


def stream(messages: list[AgnoMessage], offered: list[dict] | None = ALL_TOOLS):
    return list(DemoModel().invoke_stream(messages, AgnoMessage(role="assistant"), tools=offered))


def only_call(response) -> tuple[str, dict]:
    assert not response.content
    assert response.tool_calls is not None
    assert len(response.tool_calls) == 1
    (call,) = response.tool_calls
    assert call["type"] == "function"
    assert call["id"]
    return call["function"]["name"], json.loads(call["function"]["arguments"])


# --- the model on its own --------------------------------------------------------------------


def test_plain_text_gets_a_reply_quoting_it_and_saying_it_is_the_offline_demo():
    response = ask([user("hello there")])
    assert response.role == "assistant"
    assert not response.tool_calls
    assert "You said: “hello there”." in response.content
    assert "offline demo model" in response.content
    assert "OPENAI_API_KEY" in response.content


def test_the_reply_counts_the_earlier_messages():
    history = [user("one"), AgnoMessage(role="assistant", content="two"), user("three")]
    assert "This conversation had 2 earlier messages." in ask(history).content
    assert "This conversation had 0 earlier messages." in ask([user("one")]).content
    assert "had 1 earlier message." in ask(history[1:]).content


def test_the_same_input_gives_the_same_output():
    for text in ("hello there", "calculate (2+3)*4", "checkpoint as start"):
        first = ask([user(text)], model=DemoModel())
        second = ask([user(text)], model=DemoModel())
        assert first.content == second.content
        assert first.tool_calls == second.tool_calls
        pieces = [p.content for p in stream([user(text)])]
        assert pieces == [p.content for p in stream([user(text)])]


def test_the_stream_comes_in_several_pieces_that_join_into_the_reply():
    messages = [user("tell me something")]
    pieces = stream(messages)
    words = [p.content for p in pieces if p.content]
    assert len(words) > 10
    assert "".join(words) == ask(messages).content
    assert all(p.role == "assistant" for p in pieces)
    # The usage comes with the last piece.
    assert pieces[-1].response_usage is not None
    assert pieces[-1].response_usage.output_tokens > 0


def test_a_tool_call_is_streamed_as_one_piece():
    pieces = stream([user("calculate (2+3)*4")])
    assert len(pieces) == 1
    assert only_call(pieces[0]) == ("calculate", {"expression": "(2+3)*4"})


@pytest.mark.parametrize(
    ("text", "tool", "arguments"),
    [
        ("calculate (2+3)*4", "calculate", {"expression": "(2+3)*4"}),
        ("what is 2^10?", "calculate", {"expression": "2^10"}),
        ("checkpoint as after-intro", "create_checkpoint", {"name": "after-intro"}),
        ('save checkpoint named "my start"', "create_checkpoint", {"name": "my start"}),
        (
            "roll back to after-intro",
            "rollback_to_checkpoint_tool",
            {"checkpoint_id_or_name": "after-intro"},
        ),
        ("rollback to 3", "rollback_to_checkpoint_tool", {"checkpoint_id_or_name": "3"}),
        (
            "roll back to checkpoint 3",
            "rollback_to_checkpoint_tool",
            {"checkpoint_id_or_name": "3"},
        ),
        ("list checkpoints", "list_checkpoints_tool", {}),
        ("show my checkpoints", "list_checkpoints_tool", {}),
        ("delete checkpoint 4", "delete_checkpoint_tool", {"checkpoint_id": 4}),
        ("info on checkpoint 4", "get_checkpoint_info_tool", {"checkpoint_id": 4}),
        (
            "clean up automatic checkpoints keep 2",
            "cleanup_auto_checkpoints_tool",
            {"keep_latest": 2},
        ),
        ("clean up automatic checkpoints", "cleanup_auto_checkpoints_tool", {"keep_latest": 5}),
    ],
)
def test_a_plain_request_calls_the_matching_tool(text, tool, arguments):
    assert only_call(ask([user(text)])) == (tool, arguments)


@pytest.mark.parametrize(
    ("text", "tool", "arguments"),
    [
        ("delete checkpoint 4", "delete_checkpoint_tool", {"checkpoint_id": 4}),
        ("delete checkpoint #4", "delete_checkpoint_tool", {"checkpoint_id": 4}),
        ("info on checkpoint 4", "get_checkpoint_info_tool", {"checkpoint_id": 4}),
        ("details about checkpoint #7", "get_checkpoint_info_tool", {"checkpoint_id": 7}),
    ],
)
def test_delete_and_info_are_recognised_when_create_checkpoint_is_not_offered(
    text, tool, arguments
):
    offered = tools(*(name for name in TOOL_NAMES if name != "create_checkpoint"))
    assert only_call(ask([user(text)], offered)) == (tool, arguments)


@pytest.mark.parametrize(
    ("text", "offered"),
    [
        ("calculate 2+3", tools(*(name for name in TOOL_NAMES if name != "calculate"))),
        ("checkpoint as start", tools("calculate")),
        ("list checkpoints", tools("calculate")),
        ("calculate 2+3", None),
        ("calculate 2+3", []),
    ],
)
def test_a_tool_is_not_called_when_it_is_not_offered(text, offered):
    response = ask([user(text)], offered)
    assert not response.tool_calls
    assert f"You said: “{text}”." in response.content


def test_small_talk_calls_no_tool():
    for text in ("hello", "I love checkpoints", "what is the capital of France?"):
        response = ask([user(text)])
        assert not response.tool_calls, text
        assert "offline demo" in response.content


def _after_tool(tool_name: str, result: str) -> list[AgnoMessage]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": tool_name, "arguments": "{}"},
    }
    return [
        user("please"),
        AgnoMessage(role="assistant", tool_calls=[call]),
        AgnoMessage(role="tool", content=result, tool_name=tool_name, tool_call_id="call_1"),
    ]


def test_after_a_tool_result_the_reply_uses_it():
    response = ask(_after_tool("calculate", "20"))
    assert not response.tool_calls
    assert response.content == "The result is **20**."
    error = "Error: cannot calculate '1/0': division by zero."
    assert ask(_after_tool("calculate", error)).content == error
    listing = "Available checkpoints:\n• ID: 1 | start | Type: manual"
    assert ask(_after_tool("list_checkpoints_tool", listing)).content == listing
    pieces = stream(_after_tool("calculate", "20"))
    assert "".join(p.content for p in pieces if p.content) == "The result is **20**."


# --- through the product ---------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_word_delay(settings):
    settings.DEMO_MODEL_WORD_DELAY = 0


def fresh(branch: Branch) -> Branch:
    return Branch.objects.get(pk=branch.pk)


def run(alice, session, text: str):
    """One whole turn on the session's current branch, by an agent built as the web and API
    turns build theirs (it carries out a rollback the model asks for itself)."""
    agent = RollbackAgent(
        session.pk,
        build_model(session.settings),
        auto_checkpoint=auto_checkpoint_enabled(session),
        skip_session_creation=True,
        user=alice,
        carry_out_rollbacks=True,
    )
    assert isinstance(agent.model, DemoModel)
    agent.run(text)
    return agent


def test_calculate_runs_the_tool_and_stores_the_whole_exchange(alice, session, branch):
    agent = run(alice, session, "calculate 2+3")
    turn = agent.last_turn
    assert turn.status == Turn.Status.DONE
    assert turn.error == ""
    assert turn.tools_used == ["calculate"]
    assert "5" in turn.reply
    assert agent.internal_session.pk == branch.pk

    history = branch_history(agent.refresh_branch())
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    asked, call, result, reply = history
    assert asked.content == "calculate 2+3"
    assert asked.position == turn.user_message_position == 0
    (tool_call,) = call.tool_calls
    assert tool_call["function"]["name"] == "calculate"
    assert json.loads(tool_call["function"]["arguments"]) == {"expression": "2+3"}
    assert result.tool_name == "calculate"
    assert result.tool_args == {"expression": "2+3"}
    assert result.tool_result == "5"
    assert result.tool_call_id == tool_call["id"]
    assert reply.content == turn.reply == "The result is **5**."


def test_a_write_takes_an_automatic_checkpoint_and_a_sum_none(alice, session):
    assert run(alice, session, "calculate 2+3").last_turn.checkpoint is None
    agent = run(alice, session, "write a file notes.md saying hello")
    turn = agent.last_turn
    length = len(branch_history(agent.refresh_branch()))
    checkpoint = turn.checkpoint
    assert checkpoint is not None
    assert checkpoint.checkpoint_name == "after-write_file"
    assert checkpoint.is_auto
    assert checkpoint.branch_id == agent.internal_session.pk
    assert checkpoint.message_count == length
    assert checkpoint.metadata["trigger"] == "tool_call"
    assert checkpoint.metadata["tool_name"] == "write_file"
    assert checkpoint.metadata["message_count"] == length
    assert list(Checkpoint.objects.all()) == [checkpoint]


def test_the_reply_is_marked_as_the_demo_model(alice, session):
    agent = run(alice, session, "calculate 2+3")
    reply = branch_history(agent.refresh_branch())[-1]
    assert reply.role == "assistant"
    assert reply.metadata["model"] == DEMO_MODEL_ID == "rollback-demo"
    assert reply.metadata["demo"] is True
    assert agent.last_turn.metadata["model"] == "rollback-demo"
    assert agent.last_turn.metadata["demo"] is True


def test_a_plain_message_gets_the_demo_reply(alice, session, branch):
    say(branch, "hello", "hi there")
    agent = run(alice, session, "how are you")
    turn = agent.last_turn
    assert turn.status == Turn.Status.DONE
    assert turn.tools_used == []
    assert turn.checkpoint is None
    assert "You said: “how are you”." in turn.reply
    assert "had 2 earlier messages" in turn.reply
    history = branch_history(agent.refresh_branch())
    assert contents(history) == ["hello", "hi there", "how are you", turn.reply]


def test_checkpoint_as_marks_the_conversation_as_it_stood_when_asked(alice, session, branch):
    say(branch, "hello", "hi there")
    agent = run(alice, session, "checkpoint as start")
    turn = agent.last_turn
    assert turn.status == Turn.Status.DONE
    assert turn.tools_used == ["create_checkpoint"]
    assert "'start' created" in turn.reply

    start = Checkpoint.objects.get(checkpoint_name="start")
    assert not start.is_auto
    assert start.branch_id == branch.pk
    assert start.message_count == turn.user_message_position == 2
    assert contents(branch_history(fresh(branch), end=start.message_count)) == [
        "hello",
        "hi there",
    ]
    # A checkpoint tool takes no automatic checkpoint.
    assert turn.checkpoint is None
    assert not Checkpoint.objects.filter(is_auto=True).exists()
    assert Checkpoint.objects.count() == 1


def test_roll_back_to_makes_a_new_branch_with_the_history_up_to_the_checkpoint(
    alice, session, branch
):
    say(branch, "hello", "hi there")
    run(alice, session, "checkpoint as start")
    run(alice, session, "another message")
    agent = run(alice, session, "roll back to start")
    turn = agent.last_turn
    start = Checkpoint.objects.get(checkpoint_name="start")

    assert turn.status == Turn.Status.DONE
    assert turn.tools_used == ["rollback_to_checkpoint_tool"]
    assert turn.rolled_back_to == start

    new = current_branch(session)
    assert new.pk != branch.pk
    assert agent.internal_session.pk == new.pk
    assert new.parent_id == branch.pk
    assert new.forked_from_id == start.pk
    old_history = branch_history(fresh(branch))
    new_history = branch_history(new)
    assert [m.pk for m in new_history] == [m.pk for m in old_history[: start.message_count]]
    assert contents(new_history) == ["hello", "hi there"]
    # Nothing is lost: the old branch keeps all its messages, the rollback turn's included.
    assert len(old_history) == 2 + 4 + 2 + 4
    assert old_history[-1].content == turn.reply

    # The next turn answers on the new branch, from exactly that history.
    after = run(alice, session, "where are we")
    assert after.internal_session.pk == new.pk
    assert after.last_turn.user_message_position == len(new_history)
    assert f"had {len(new_history)} earlier messages" in after.last_turn.reply
    assert contents(branch_history(current_branch(session)))[:3] == [
        "hello",
        "hi there",
        "where are we",
    ]


def test_list_checkpoints_lists_them(alice, session):
    run(alice, session, "checkpoint as start")
    run(alice, session, "write a file notes.md saying hello")
    agent = run(alice, session, "list checkpoints")
    turn = agent.last_turn
    assert turn.status == Turn.Status.DONE
    assert turn.tools_used == ["list_checkpoints_tool"]
    start = Checkpoint.objects.get(checkpoint_name="start")
    auto = Checkpoint.objects.get(checkpoint_name="after-write_file")
    assert turn.reply.startswith("Available checkpoints:")
    assert f"ID: {start.pk} | start | Type: manual" in turn.reply
    # The demo names a tool as the user would ask for it (asked_as).
    assert f"ID: {auto.pk} | after-“write … saying …” | Type: auto" in turn.reply
    assert Checkpoint.objects.count() == 2


def test_delete_checkpoint_deletes_it(alice, session, branch, checkpoint_at):
    say(branch, "hello", "hi there")
    doomed = checkpoint_at(branch, "doomed")
    agent = run(alice, session, f"delete checkpoint {doomed.pk}")
    turn = agent.last_turn
    assert turn.status == Turn.Status.DONE
    assert turn.tools_used == ["delete_checkpoint_tool"]
    assert not Checkpoint.objects.filter(pk=doomed.pk).exists()
    assert f"Checkpoint {doomed.pk} deleted" in turn.reply
    assert Checkpoint.objects.count() == 0


def test_roll_back_to_an_unknown_checkpoint_says_so_and_changes_nothing(alice, session, branch):
    say(branch, "hello", "hi there")
    agent = run(alice, session, "roll back to nosuch")
    turn = agent.last_turn
    assert turn.status == Turn.Status.DONE
    assert turn.tools_used == []  # it refused: nothing ran to an end
    assert turn.rolled_back_to is None
    tool = [m for m in branch_history(agent.refresh_branch()) if m.role == "tool"]
    assert len(tool) == 1
    assert "There is no checkpoint named 'nosuch'" in tool[0].tool_result
    assert "There is no checkpoint named 'nosuch'" in turn.reply
    assert Branch.objects.filter(session=session).count() == 1
    assert current_branch(session).pk == branch.pk
    assert agent.internal_session.pk == branch.pk


# --- the workspace and the plan --------------------------------------------------------------

FILE_AND_PLAN_TOOLS = tools(
    *TOOL_NAMES,
    "list_dir",
    "read_file",
    "write_file",
    "delete_file",
    "create_todo",
    "get_todo",
    "mark_todo_done",
)


@pytest.mark.parametrize(
    ("text", "tool", "arguments"),
    [
        (
            "write a file notes.md saying hello",
            "write_file",
            {"path": "notes.md", "content": "hello"},
        ),
        (
            'create notes.md with "two words"',
            "write_file",
            {"path": "notes.md", "content": "two words"},
        ),
        (
            "please write docs/plan.txt: step one\nstep two",
            "write_file",
            {"path": "docs/plan.txt", "content": "step one\nstep two"},
        ),
        (
            # The content may say anything, even what another tool would do.
            "write notes.md saying roll back to start",
            "write_file",
            {"path": "notes.md", "content": "roll back to start"},
        ),
        ("read notes.md", "read_file", {"path": "notes.md"}),
        ("show me the file docs/plan.txt", "read_file", {"path": "docs/plan.txt"}),
        ("list the files", "list_dir", {"path": ""}),
        ("show me the files in docs", "list_dir", {"path": "docs"}),
        ("delete notes.md", "delete_file", {"path": "notes.md"}),
        ("remove the file notes.md.", "delete_file", {"path": "notes.md"}),
        ("add a todo: buy milk", "create_todo", {"title": "buy milk"}),
        ("add todo bake bread", "create_todo", {"title": "bake bread"}),
        ("show my todo list", "get_todo", {}),
        ("what's on my todo list?", "get_todo", {}),
        ("mark todo 1 done", "mark_todo_done", {"todo_id": 1}),
        ("mark todo #2 as done", "mark_todo_done", {"todo_id": 2}),
        # The checkpoint requests still mean what they meant.
        ("delete checkpoint 4", "delete_checkpoint_tool", {"checkpoint_id": 4}),
        ("list checkpoints", "list_checkpoints_tool", {}),
    ],
)
def test_a_plain_request_calls_the_matching_file_or_plan_tool(text, tool, arguments):
    assert only_call(ask([user(text)], FILE_AND_PLAN_TOOLS)) == (tool, arguments)


def test_the_file_tools_are_not_called_when_not_offered():
    response = ask([user("write a file notes.md saying hello")], ALL_TOOLS)
    assert not response.tool_calls


def test_the_demo_writes_reads_lists_and_deletes_a_file(alice, session, branch):
    from workspace.selectors import workspace_files

    agent = run(alice, session, "write a file notes.md saying hello")
    assert agent.last_turn.status == Turn.Status.DONE, agent.last_turn.error
    assert agent.last_turn.reply == "✓ Created notes.md (5 bytes)."
    assert agent.last_turn.checkpoint.checkpoint_name == "after-write_file"
    assert run(alice, session, "read notes.md").last_turn.reply == "hello"
    listing = run(alice, session, "list the files").last_turn.reply
    assert listing == "Files in the workspace:\nnotes.md (5 bytes)"
    assert run(alice, session, "delete notes.md").last_turn.reply == "✓ Deleted notes.md."
    assert workspace_files(fresh(branch)) == []
    effects = [m.effect for m in branch_history(fresh(branch)) if m.role == "tool"]
    assert effects == ["workspace", "none", "none", "workspace"]


def test_the_demo_keeps_a_todo_list(alice, session, branch):
    run(alice, session, "add a todo: buy milk")
    run(alice, session, "add a todo: bake bread")
    assert run(alice, session, "mark todo 1 done").last_turn.reply == (
        "✓ Marked todo 1 done: buy milk"
    )
    assert run(alice, session, "show my todo list").last_turn.reply == (
        "Todo list:\n1. [x] buy milk\n2. [ ] bake bread\n1 of 2 done."
    )
    assert fresh(branch).session_state["todos"][1] == {
        "id": 2,
        "title": "bake bread",
        "done": False,
    }


def test_reading_an_empty_file_gets_a_reply_saying_so(alice, session):
    run(alice, session, "write notes.md saying ")
    turn = run(alice, session, "read notes.md").last_turn
    assert turn.status == Turn.Status.DONE, turn.error
    assert turn.reply == "The file is empty."


def test_a_tool_result_reaches_the_user_without_tool_names():
    missing = (
        "✗ There is no checkpoint named 'x'. Use list_checkpoints_tool to see the checkpoints."
    )
    reply = ask(_after_tool("rollback_to_checkpoint_tool", missing)).content
    assert (
        reply == "✗ There is no checkpoint named 'x'. Ask me to “list the checkpoints” to see them."
    )
    no_todo = "✗ No todo 9 in the plan. Use get_todo to see the todos."
    assert ask(_after_tool("mark_todo_done", no_todo)).content == (
        "✗ No todo 9 in the plan. Ask me to “show the todos” to see them."
    )
    stray = "Ask delete_checkpoint_tool or list_dir; calculate stays a word."
    assert ask(_after_tool("get_todo", stray)).content == (
        "Ask “delete checkpoint …” or “list the files”; calculate stays a word."
    )


def test_an_unknown_checkpoint_is_answered_in_the_users_words(alice, session, branch):
    say(branch, "hello", "hi there")
    reply = run(alice, session, "roll back to nosuch").last_turn.reply
    assert "There is no checkpoint named 'nosuch'" in reply
    assert "“list the checkpoints”" in reply
    assert not any(name in reply for name in TOOL_NAMES if name != "calculate")
