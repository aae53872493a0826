"""agno's tool schemas are built once per process, not once per turn (agents.tools.agno_tools).

agno derives a tool's JSON schema from its callable (`_derive_entrypoint_schema`) and wraps it
in a pydantic validator (`Function._wrap_callable_uncached`), and it finds which parameters the
framework supplies (`_compute_framework_params`, for every run's copy of a tool unless a cache
it can keep has them); all are counted here by wrapping agno's own functions, and the turns run
for real against the local model server."""

from __future__ import annotations

import pytest
from agno.tools import function as agno_function

from checkpoints.models import Checkpoint
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema_builds(monkeypatch):
    """The names of the callables agno built a schema or a validator for, in order."""
    built: list[str] = []
    derive = agno_function._derive_entrypoint_schema
    wrap = agno_function.Function._wrap_callable_uncached

    def counted_derive(entrypoint, *args):
        built.append(f"schema:{getattr(entrypoint, '__name__', entrypoint)}")
        return derive(entrypoint, *args)

    def counted_wrap(func):
        built.append(f"validator:{getattr(func, '__name__', func)}")
        return wrap(func)

    framework = agno_function._compute_framework_params

    def counted_framework(entrypoint):
        built.append(f"framework:{getattr(entrypoint, '__name__', entrypoint)}")
        return framework(entrypoint)

    monkeypatch.setattr(agno_function, "_derive_entrypoint_schema", counted_derive)
    monkeypatch.setattr(agno_function, "_compute_framework_params", counted_framework)
    monkeypatch.setattr(
        agno_function.Function, "_wrap_callable_uncached", staticmethod(counted_wrap)
    )
    return built


def test_a_second_turn_builds_no_tool_schema_and_its_tools_act_on_its_own_session(
    fake_llm, session, schema_builds
):
    fake_llm.queue(Reply("one"))
    assert ask(session, "first").status == "done"  # may build them: the first turn here
    schema_builds.clear()

    fake_llm.queue(ToolCalls([ToolCall("create_checkpoint", {"name": "kept"})]), Reply("two"))
    turn = ask(session, "second")

    assert turn.status == "done"
    assert turn.tools_used == ["create_checkpoint"]
    assert schema_builds == []
    # The tool built once ran as this turn's agent: on this session's branch, at this turn.
    checkpoint = Checkpoint.objects.get(checkpoint_name="kept")
    assert checkpoint.branch_id == turn.branch_id
    # The model saw the same tools, with the same schemas, on both turns.
    first, second = fake_llm.requests[0]["tools"], fake_llm.requests[1]["tools"]
    assert first == second
    names = {tool["function"]["name"] for tool in second}
    assert {"create_checkpoint", "calculate", "rollback_to_checkpoint_tool"} <= names
    created = next(t for t in second if t["function"]["name"] == "create_checkpoint")
    assert "self" not in created["function"]["parameters"]["properties"]
