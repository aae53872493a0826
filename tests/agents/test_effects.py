"""Every stored tool message records its tool's effect (none, workspace, external): the
built-ins as agents.tools declares them, custom tools (seed 003's `tools=[...]` and AGENT_TOOLS)
as they declare (external when they declare nothing), an unknown or refused call too."""

from __future__ import annotations

import pytest

from agents.model import build_model
from agents.rollback_agent import RollbackAgent
from agents.tools import tool_effect
from sessions_app.models import Message
from sessions_app.selectors import branch_history, current_branch
from tests.agents import custom_tools
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from workspace.models import FileVersion

pytestmark = pytest.mark.django_db(transaction=True)


def effects(session) -> list[tuple[str, str]]:
    """(tool name, effect) of each tool message of the current branch, in order."""
    history = branch_history(current_branch(session))
    return [(m.tool_name, m.effect) for m in history if m.role == Message.Role.TOOL]


def test_each_builtin_tools_message_records_its_declared_effect(fake_llm, session, settings):
    settings.AGENT_MAX_TOOL_CALLS = 20
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("calculate", {"expression": "2+2"}),
                ToolCall("write_file", {"path": "a.md", "content": "a"}),
                ToolCall("read_file", {"path": "a.md"}),
                ToolCall("list_dir", {}),
                ToolCall("delete_file", {"path": "a.md"}),
                ToolCall("create_todo", {"title": "t"}),
                ToolCall("get_todo", {}),
                ToolCall("mark_todo_done", {"todo_id": 1}),
                ToolCall("remember", {"key": "editor", "category": "Skill", "l0": "vim"}),
                ToolCall("recall", {"query": "editor"}),
                ToolCall("list_checkpoints_tool", {}),
            ]
        ),
        Reply("All done."),
    )
    turn = ask(session, "use every tool")
    assert turn.status == "done", turn.error
    assert effects(session) == [
        ("calculate", "none"),
        ("write_file", "workspace"),
        ("read_file", "none"),
        ("list_dir", "none"),
        ("delete_file", "workspace"),
        ("create_todo", "workspace"),
        ("get_todo", "none"),
        ("mark_todo_done", "workspace"),
        ("remember", "external"),  # a memory outlives every restore
        ("recall", "none"),
        ("list_checkpoints_tool", "none"),
    ]
    user, *_, reply = branch_history(current_branch(session))
    assert (user.effect, reply.effect) == ("", "")  # only tool messages have one


def test_a_call_that_did_not_run_still_records_its_tools_effect(fake_llm, session):
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("write_file", '{"path": "a.md", "content": '),  # not JSON: never runs
                ToolCall("no_such_tool", {}),
            ]
        ),
        Reply("Sorry."),
    )
    turn = ask(session, "try")
    assert turn.status == "done", turn.error
    history = [m for m in branch_history(current_branch(session)) if m.role == "tool"]
    assert [(m.tool_name, m.effect, m.metadata.get("error")) for m in history] == [
        ("write_file", "workspace", True),
        ("no_such_tool", "external", True),  # unknown: the safe assumption
    ]
    assert not FileVersion.objects.exists()


def test_seed_custom_tools_record_the_effect_they_declare_external_by_default(fake_llm, session):
    custom_tools.SENT.clear()
    agent = RollbackAgent(
        session.pk,
        build_model(),
        skip_session_creation=True,
        tools=[custom_tools.send_message, custom_tools.lookup_order],
    )
    assert agent.tool_effects["send_message"] == "external"
    assert agent.tool_effects["lookup_order"] == "none"
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("lookup_order", {"order_id": "42"}),
                ToolCall("send_message", {"to": "bob", "text": "shipped"}),
            ]
        ),
        Reply("Told Bob."),
    )
    agent.run("tell bob about order 42")
    assert agent.last_turn.status == "done", agent.last_turn.error
    assert custom_tools.SENT == ["bob: shipped"]
    assert effects(session) == [("lookup_order", "none"), ("send_message", "external")]


def test_a_custom_tool_with_a_builtins_name_replaces_it_with_its_own_effect(fake_llm, session):
    written: list[str] = []

    def write_file(path: str, content: str) -> str:
        """Write a file somewhere else entirely (declares nothing: external)."""
        written.append(path)
        return f"uploaded {path}"

    @tool_effect("none")
    def read_file(path: str) -> str:
        """Read a file from a fixed table."""
        return f"the text of {path}"

    agent = RollbackAgent(
        session.pk, build_model(), skip_session_creation=True, tools=[write_file, read_file]
    )
    assert (agent.tool_effects["write_file"], agent.tool_effects["read_file"]) == (
        "external",
        "none",
    )
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("write_file", {"path": "a.md", "content": "x"}),
                ToolCall("read_file", {"path": "a.md"}),
            ]
        ),
        Reply("Done."),
    )
    agent.run("write and read a.md")
    assert written == ["a.md"]
    assert not FileVersion.objects.exists()  # the built-in never ran
    assert effects(session) == [("write_file", "external"), ("read_file", "none")]
    results = [m.tool_result for m in branch_history(current_branch(session)) if m.role == "tool"]
    assert results == ["uploaded a.md", "the text of a.md"]


def test_agent_tools_setting_tools_record_their_declared_effects(fake_llm, session, settings):
    settings.AGENT_TOOLS = [
        "tests.agents.custom_tools.send_message",
        "tests.agents.custom_tools.lookup_order",
    ]
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("send_message", {"to": "carol", "text": "hi"}),
                ToolCall("lookup_order", {"order_id": "7"}),
            ]
        ),
        Reply("Done."),
    )
    turn = ask(session, "tell carol hi, look up order 7")
    assert turn.status == "done", turn.error
    assert effects(session) == [("send_message", "external"), ("lookup_order", "none")]
