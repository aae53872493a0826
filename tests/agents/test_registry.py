"""The registry of the built-in tools (agents.registry, agents.builtin_tools): a tool declared
once is offered to the model, named in the instructions, classified for its effect and approval,
and called by the offline demo model; the README lists exactly the registered tools."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from agents.builtin_tools import REGISTRY
from agents.demo_model import DemoModel
from agents.registry import BuiltinTool, Group, Intent
from agents.rollback_agent import RollbackAgent
from checkpoints.models import Checkpoint
from sessions_app.models import Message
from sessions_app.selectors import branch_history, current_branch
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

pytestmark = pytest.mark.django_db(transaction=True)

README = Path(__file__).resolve().parents[2] / "README.md"


def shout(text: str) -> str:
    """Say something loudly.

    Args:
        text: what to say.
    """
    return f"{text.upper()}!"


LOUD = Group("loud", 60, "Use {names} to say something loudly.")


@pytest.fixture
def shout_tool():
    """A throwaway built-in tool, registered for the test only: declared in one place."""
    tool = REGISTRY.register(
        BuiltinTool(
            "shout",
            "workspace",
            LOUD,
            function=shout,
            intents=(
                Intent(5, re.compile(r"^\s*shout\s+(?P<text>\S.*?)\s*$", re.I), lambda g: dict(g)),
            ),
            asked_as="shout …",
        )
    )
    yield tool
    REGISTRY.unregister("shout")


def tool_messages(session) -> list[Message]:
    history = branch_history(current_branch(session))
    return [m for m in history if m.role == Message.Role.TOOL]


def test_a_registered_tool_is_offered_to_the_model_and_named_in_its_instructions(
    shout_tool, fake_llm, session
):
    fake_llm.queue(ToolCalls([ToolCall("shout", {"text": "hello"})]), Reply("Done."))
    turn = ask(session, "say hello loudly")
    assert turn.status == "done", turn.error
    request = fake_llm.requests[0]
    offered = [t["function"]["name"] for t in request["tools"]]
    assert "shout" in offered
    assert set(offered) == REGISTRY.names()
    assert "Use shout to say something loudly." in request["messages"][0]["content"]
    [called] = tool_messages(session)
    assert (called.tool_name, called.tool_result, called.effect) == ("shout", "HELLO!", "workspace")
    # Not a checkpoint tool: the turn that used it ends with an automatic checkpoint.
    assert Checkpoint.objects.filter(branch__session=session, is_auto=True).count() == 1


def test_a_registered_tool_is_classified_for_its_effect_and_approval(shout_tool, alice, session):
    agent = RollbackAgent(session.pk, None, skip_session_creation=True, user=alice)
    assert agent.tool_effects["shout"] == "workspace"
    assert "shout" not in agent.tool_approvals
    assert "shout" not in agent.checkpoint_tools

    REGISTRY.unregister("shout")
    REGISTRY.register(BuiltinTool("shout", "external", LOUD, approval=True, function=shout))
    agent = RollbackAgent(session.pk, None, skip_session_creation=True, user=alice)
    assert agent.tool_effects["shout"] == "external"
    assert "shout" in agent.tool_approvals


def test_the_demo_model_calls_a_registered_tool_by_its_intent(shout_tool, alice, session):
    agent = RollbackAgent(session.pk, DemoModel(), skip_session_creation=True, user=alice)
    agent.run("shout hello there")
    [called] = tool_messages(session)
    assert (called.tool_name, called.tool_args) == ("shout", {"text": "hello there"})
    assert agent.last_turn is not None
    assert agent.last_turn.reply == "HELLO THERE!"


def test_the_demo_model_puts_a_registered_tools_words_in_place_of_its_name(shout_tool):
    from agents.demo_model import in_user_words

    assert in_user_words("Use shout for that.") == "Use “shout …” for that."


def signature(tool: BuiltinTool) -> str:
    """`name(param, ...)` of a built-in tool, from its implementation."""
    implementation = tool.function or getattr(RollbackAgent, tool.name)
    params = [p for p in inspect.signature(implementation).parameters if p != "self"]
    return f"{tool.name}({', '.join(params)})"


def test_the_readme_lists_the_registered_tools_with_their_parameters():
    text = " ".join(README.read_text().split())
    start = text.index("The agent's tools (the names the model sees):")
    end = text.index("beside the tools of the operator's MCP servers", start)
    listed = re.findall(r"`([a-z_]+\([a-z0-9_, ]*\))`", text[start:end])
    assert listed == [signature(tool) for tool in REGISTRY]
