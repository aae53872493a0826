"""The Python API of seed 003: RollbackAgent and AgentService, scoped to a user."""

from __future__ import annotations

import pytest
from agno.agent import Agent

from agents.demo_model import DemoModel
from agents.model import build_model
from agents.rollback_agent import CHECKPOINT_TOOLS, MEMORY_TOOLS, RollbackAgent
from agents.service import AgentService
from agents.tools import FILE_TOOLS, SHELL_TOOLS, TODO_TOOLS
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create
from sandbox.availability import availability
from sessions_app.models import Branch
from sessions_app.selectors import current_branch
from sessions_app.services import branch_set_state, session_create
from tests.conftest import say
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_demo(settings):
    settings.DEMO_MODEL_WORD_DELAY = 0


def test_rollback_agent_owns_an_agno_agent_with_the_contract_tools(session):
    model = DemoModel()
    agent = RollbackAgent(external_session_id=session.pk, model=model)
    assert isinstance(agent.agent, Agent)
    assert agent.agent.model is model
    names = {getattr(t, "__name__", None) for t in agent.tools}
    shell = SHELL_TOOLS if availability().ok else frozenset()
    assert names == CHECKPOINT_TOOLS | MEMORY_TOOLS | FILE_TOOLS | TODO_TOOLS | shell | {
        "calculate"
    }
    # agno gets the same tools (it asks at each run), the bound methods as Functions bound to
    # this agent; outside a turn, no MCP tool is among them.
    assert agent.agent.tools == agent.run_tools
    given = {getattr(t, "name", getattr(t, "__name__", None)) for t in agent.run_tools()}
    assert given == names


def test_a_new_agent_starts_a_new_empty_current_branch(session, branch):
    say(branch, "old", "talk")
    agent = RollbackAgent(external_session_id=session.pk, model=DemoModel())
    assert agent.internal_session.pk != branch.pk
    assert current_branch(session).pk == agent.internal_session.pk
    assert agent.get_conversation_history() == []


def test_skip_session_creation_resumes_the_current_branch(session, branch):
    say(branch, "old", "talk")
    agent = RollbackAgent(
        external_session_id=session.pk, model=DemoModel(), skip_session_creation=True
    )
    assert agent.internal_session.pk == branch.pk
    assert [m["content"] for m in agent.get_conversation_history()] == ["old", "talk"]


def test_unknown_or_foreign_session_is_a_value_error(session, bob):
    with pytest.raises(ValueError, match="not found"):
        RollbackAgent(external_session_id=999_999, model=DemoModel())
    with pytest.raises(ValueError, match="not found"):
        RollbackAgent(external_session_id=session.pk, model=DemoModel(), user=bob)
    with pytest.raises(ValueError, match="not found"):
        AgentService(user=bob).create_new_agent(session.pk)
    with pytest.raises(ValueError, match="not found"):
        AgentService(user=bob).list_internal_sessions(session.pk)


def test_checkpoint_methods_return_the_seed_strings(session, branch):
    say(branch, "a", "b")
    agent = AgentService().resume_agent(session.pk)
    created = agent.create_checkpoint("before-complex-topic")
    cp = Checkpoint.objects.get(checkpoint_name="before-complex-topic")
    assert created == f"✓ Checkpoint 'before-complex-topic' created successfully (ID: {cp.pk})"
    assert cp.message_count == 2  # outside a turn: the branch as it stands
    listing = agent.list_checkpoints_tool()
    assert listing.startswith("Available checkpoints:")
    assert f"• ID: {cp.pk} | before-complex-topic | Type: manual | Created: " in listing
    info = agent.get_checkpoint_info_tool(cp.pk)
    assert "• Name: before-complex-topic" in info
    assert "• Conversation Length: 2 messages" in info
    assert agent.delete_checkpoint_tool(cp.pk) == f"✓ Checkpoint {cp.pk} deleted successfully."
    assert agent.delete_checkpoint_tool(cp.pk).startswith("✗")
    assert agent.list_checkpoints_tool() == "No checkpoints yet."


def test_checkpoint_tools_never_reach_another_sessions_checkpoints(alice, session):
    other = session_create(owner=alice, name="other")
    foreign = checkpoint_create(branch=current_branch(other), name="theirs")
    agent = AgentService().resume_agent(session.pk)
    assert agent.get_checkpoint_info_tool(foreign.pk).startswith("✗")
    assert agent.delete_checkpoint_tool(foreign.pk).startswith("✗")
    assert agent.rollback_to_checkpoint_tool("theirs").startswith("✗")
    assert Checkpoint.objects.filter(pk=foreign.pk).exists()
    assert agent.requested_rollback is None


def test_a_too_long_checkpoint_name_is_a_clear_tool_error(session):
    agent = AgentService().resume_agent(session.pk)
    assert "limit is 200" in agent.create_checkpoint("x" * 201)
    assert not Checkpoint.objects.exists()


def test_handle_agent_response_reports_the_request_and_rollback_to_checkpoint_carries_it_out(
    session, branch
):
    say(branch, "a", "b")
    service = AgentService()
    agent = service.resume_agent(session.pk)
    agent.create_checkpoint("two")
    say(branch, "c", "d")
    answer = agent.rollback_to_checkpoint_tool("two")
    assert answer.startswith("✓ Rollback to checkpoint 'two'")
    assert agent.session_state["rollback_requested"] is True
    assert service.handle_agent_response(agent, None) is True
    assert service.handle_agent_response(agent, None) is True  # it only looks
    assert current_branch(session).pk == branch.pk
    assert Branch.objects.filter(session=session).count() == 1
    new_agent = service.rollback_to_checkpoint(
        session.pk, agent.session_state.get("rollback_checkpoint_id")
    )
    assert new_agent.internal_session.pk == current_branch(session).pk != branch.pk
    assert [m["content"] for m in new_agent.get_conversation_history()] == ["a", "b"]
    assert "rollback_requested" not in new_agent.get_session_state()


def test_an_agent_that_carries_out_rollbacks_leaves_no_request_to_handle(session, branch):
    """The web and API turns' agents (carry_out_rollbacks) restore the checkpoint themselves
    when the turn ends."""
    say(branch, "a", "b")
    checkpoint_create(branch=branch, name="two")
    say(branch, "c", "d")
    agent = RollbackAgent(
        session.pk, DemoModel(), skip_session_creation=True, carry_out_rollbacks=True
    )
    agent.run("roll back to two")
    assert agent.last_turn.rolled_back_to.checkpoint_name == "two"
    assert agent.internal_session.pk == current_branch(session).pk != branch.pk
    assert AgentService().handle_agent_response(agent, None) is False


def test_cleanup_tool_keeps_the_latest_automatic_checkpoints(session, branch):
    for i in range(4):
        checkpoint_create(branch=branch, name=f"auto-{i}", is_auto=True)
    agent = AgentService().resume_agent(session.pk)
    assert agent.cleanup_auto_checkpoints_tool(keep_latest=1) == (
        "✓ Cleaned up 3 old automatic checkpoints. Kept the latest 1."
    )
    assert agent.cleanup_auto_checkpoints_tool(keep_latest=-1).startswith("✗")


def test_from_checkpoint_gives_an_agent_on_a_new_branch(session, branch):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="cp")
    say(branch, "c")
    agent = RollbackAgent.from_checkpoint(
        checkpoint_id=cp.pk, external_session_id=session.pk, model=DemoModel()
    )
    assert agent.internal_session.parent_id == branch.pk
    assert [m["content"] for m in agent.get_conversation_history()] == ["a", "b"]


def test_service_rollback_to_an_unknown_or_foreign_checkpoint_is_none(alice, session):
    other = session_create(owner=alice, name="other")
    foreign = checkpoint_create(branch=current_branch(other), name="theirs")
    service = AgentService(user=alice)
    assert service.rollback_to_checkpoint(session.pk, 999_999) is None
    assert service.rollback_to_checkpoint(session.pk, foreign.pk) is None
    assert Branch.objects.filter(session=session).count() == 1
    with pytest.raises(ValueError, match="not found"):
        service.rollback_to_checkpoint(999_999, foreign.pk)


def test_resume_a_given_branch_makes_it_current(session, branch):
    service = AgentService()
    newer = service.create_new_agent(session.pk, session_name="Renamed").internal_session
    assert current_branch(session).pk == newer.pk
    agent = service.resume_agent(session.pk, internal_session_id=branch.pk)
    assert agent.internal_session.pk == branch.pk == current_branch(session).pk
    assert service.resume_agent(session.pk, internal_session_id=999_999) is None
    session.refresh_from_db()
    assert session.session_name == "Renamed"


def test_lists_and_summary(alice, session, branch):
    say(branch, *[f"m{i}" for i in range(12)])
    service = AgentService(user=alice)
    assert [b.pk for b in service.list_internal_sessions(session.pk)] == [branch.pk]
    checkpoint_create(branch=branch, name="x")
    assert [c.checkpoint_name for c in service.list_checkpoints(branch.pk)] == ["x"]
    summary = service.get_conversation_summary(service.resume_agent(session.pk))
    assert summary.startswith("Conversation (12 messages):")
    assert "[assistant] m11" in summary
    assert "(last 10 messages shown)" in summary
    assert "m1\n" not in summary


def test_list_checkpoints_of_another_users_branch_is_a_value_error(branch, bob):
    with pytest.raises(ValueError, match="not found"):
        AgentService(user=bob).list_checkpoints(branch.pk)


def test_run_returns_the_reply_and_records_the_turn(fake_llm, alice, session):
    fake_llm.queue(Reply("Decorators wrap functions."))
    agent = AgentService(user=alice).resume_agent(session.pk)
    response = agent.run("Explain Python decorators")
    assert response.content == "Decorators wrap functions."
    assert agent.last_turn.status == "done"
    assert [m["role"] for m in agent.get_conversation_history()] == ["user", "assistant"]


def test_service_model_config_and_session_settings(fake_llm, alice):
    s = session_create(owner=alice, name="s", metadata={"settings": {"temperature": 0.1}})
    fake_llm.queue(Reply("ok"))
    AgentService({"id": "configured-model"}, user=alice).resume_agent(s.pk).run("hi")
    body = fake_llm.requests[-1]
    assert body["model"] == "configured-model"
    assert body["temperature"] == 0.1


def test_a_state_grown_past_the_limit_is_not_saved_and_the_answer_is(
    fake_llm, alice, session, branch, settings
):
    """An extra tool may change the agent's state; beyond ROLLBACK_STATE_MAX_BYTES the turn
    still finishes with its answer, the stored state stays, and the turn says why."""
    settings.ROLLBACK_STATE_MAX_BYTES = 200
    branch_set_state(branch=branch, session_state={"kept": 1})
    agents: list[RollbackAgent] = []

    # Not `remember`: that name is the agent's own memory tool.
    def take_note(note: str) -> str:
        """Take a note for the rest of the conversation."""
        agents[0].session_state["notes"] = note * 100
        return "remembered"

    agents.append(
        RollbackAgent(
            external_session_id=session.pk,
            model=build_model(),
            user=alice,
            skip_session_creation=True,
            tools=[take_note],
        )
    )
    fake_llm.queue(ToolCalls([ToolCall("take_note", {"note": "buy milk"})]), Reply("Noted."))
    agents[0].run("note: buy milk")
    turn = agents[0].last_turn
    assert turn.status == "done"
    assert turn.reply == "Noted."
    assert turn.metadata["state_not_saved"] == (
        "The session state is 821 bytes as JSON; the limit is 200 bytes."
    )
    branch.refresh_from_db()
    assert branch.session_state == {"kept": 1}
    roles = [m["role"] for m in agents[0].get_conversation_history()]
    assert roles == ["user", "assistant", "tool", "assistant"]
    # The automatic checkpoint after the tool holds the state that was kept.
    assert Checkpoint.objects.get(pk=turn.checkpoint_id).session_state == {"kept": 1}


def test_rollback_by_a_shared_name_says_which_checkpoint_it_picked(session, branch):
    say(branch, "a", "b")
    older = checkpoint_create(branch=branch, name="after-calculate", is_auto=True)
    say(branch, "c", "d")
    newer = checkpoint_create(branch=branch, name="after-calculate", is_auto=True)
    # Names are unique in a session, but an import or checkpoints made before they were can
    # still share one.
    Checkpoint.objects.filter(pk=newer.pk).update(checkpoint_name="after-calculate")
    agent = AgentService().resume_agent(session.pk)
    answer = agent.rollback_to_checkpoint_tool("after-calculate")
    assert f"(ID: {newer.pk}, main, created " in answer
    assert "1 other checkpoint shares this name" in answer
    assert "roll back by its ID" in answer
    assert agent.requested_rollback == newer.pk
    by_id = agent.rollback_to_checkpoint_tool(str(older.pk))
    assert f"(ID: {older.pk}, main" in by_id
    assert "this name" not in by_id


def test_creating_a_checkpoint_under_a_taken_name_says_the_name_it_got(session, branch):
    agent = AgentService().resume_agent(session.pk)
    agent.create_checkpoint("draft")
    answer = agent.create_checkpoint("draft")
    cp = Checkpoint.objects.get(checkpoint_name="draft (2)")
    assert answer == (
        f"✓ Checkpoint 'draft (2)' created successfully (ID: {cp.pk}). "
        "The name 'draft' was taken in this conversation."
    )


# --- seed 003's examples, line by line ----------------------------------------------------------


def test_seed_constructor_takes_its_arguments_by_position(session, branch):
    say(branch, "a", "b")
    model = DemoModel()
    agent = RollbackAgent(session.pk, model)
    assert agent.model is model
    assert agent.auto_checkpoint is True
    assert agent.internal_session.pk != branch.pk  # a new internal session, as in the seed
    # external_session_id, model, auto_checkpoint, internal_session_repo, checkpoint_repo,
    # skip_session_creation: the seed's order.
    resumed = RollbackAgent(session.pk, model, False, None, None, True)
    assert resumed.auto_checkpoint is False
    assert resumed.internal_session.pk == current_branch(session).pk
    # Keywords still work, and agno's own keywords pass through.
    named = RollbackAgent(
        external_session_id=session.pk, model=model, skip_session_creation=True, name="helper"
    )
    assert named.name == "helper"
    assert named.internal_session.pk == resumed.internal_session.pk


def test_seed_from_checkpoint_with_the_repositories(session, branch):
    from agents.repositories import CheckpointRepository, InternalSessionRepository

    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="cp")
    say(branch, "c", "d")
    model = DemoModel()
    checkpoint_repo = CheckpointRepository()
    internal_session_repo = InternalSessionRepository()

    restored_agent = RollbackAgent.from_checkpoint(
        checkpoint_id=cp.pk,
        external_session_id=session.pk,
        model=model,
        checkpoint_repo=checkpoint_repo,
        internal_session_repo=internal_session_repo,
    )

    assert restored_agent.internal_session.forked_from_id == cp.pk
    assert [m["content"] for m in restored_agent.get_conversation_history()] == ["a", "b"]
    assert restored_agent.checkpoint_repo is checkpoint_repo
    assert restored_agent.internal_session_repo is internal_session_repo
    # The repositories read the same storage the agent writes.
    assert checkpoint_repo.get_by_id(cp.pk) == cp
    assert cp in checkpoint_repo.find_all()
    assert internal_session_repo.get_by_id(restored_agent.internal_session.pk).is_current


def test_seed_repositories_of_another_kind_are_kept_but_storage_stays_ours(
    session, branch, log_records
):
    class SeedCheckpointRepository:
        def find_all(self):
            return []

    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="cp")
    foreign = SeedCheckpointRepository()
    agent = RollbackAgent.from_checkpoint(
        cp.pk, session.pk, DemoModel(), checkpoint_repo=foreign, internal_session_repo=object()
    )
    assert agent.checkpoint_repo is foreign
    assert agent.internal_session.forked_from_id == cp.pk
    agent.create_checkpoint("kept")
    assert Checkpoint.objects.filter(checkpoint_name="kept").exists()
    said = [r.getMessage() for r in log_records if r.name == "agents.rollback_agent"]
    assert any("checkpoint_repo" in line and "not used" in line for line in said), said


def test_seed_resume_agent_of_an_unknown_session_is_none(session, bob):
    service = AgentService()
    assert service.resume_agent(999_999) is None
    assert service.resume_agent(999_999, internal_session_id=1) is None
    assert AgentService(user=bob).resume_agent(session.pk) is None  # another user's: unknown
    assert service.resume_agent(session.pk) is not None


def test_seed_rollback_flow_line_by_line(alice, session):
    """The seed's "Basic Conversation" and `handle_agent_response` examples, with the demo
    model: the run asks for the rollback, the service reports it and carries it out."""
    external_session_id = session.pk
    service = AgentService()
    agent = service.create_new_agent(external_session_id=external_session_id)
    agent.run("Hello, I want to learn Python")
    agent.run("What are variables?")
    agent.create_checkpoint("after-variables")
    agent.run("Now explain functions")
    checkpoint = Checkpoint.objects.get(checkpoint_name="after-variables")
    branches_before = set(Branch.objects.values_list("pk", flat=True))

    response = agent.run(f"Rollback to checkpoint {checkpoint.pk}")
    if service.handle_agent_response(agent, response):
        checkpoint_id = agent.session_state.get("rollback_checkpoint_id")
        new_agent = service.rollback_to_checkpoint(external_session_id, checkpoint_id)
    else:
        new_agent = None

    assert agent.last_turn.tools_used == ["rollback_to_checkpoint_tool"]
    assert checkpoint_id == checkpoint.pk
    assert new_agent is not None
    made = set(Branch.objects.values_list("pk", flat=True)) - branches_before
    assert made == {new_agent.internal_session.pk}  # one restore, not two
    assert new_agent.internal_session.forked_from_id == checkpoint.pk
    assert current_branch(session).pk == new_agent.internal_session.pk
    assert [m["content"] for m in new_agent.get_conversation_history()][:1] == [
        "Hello, I want to learn Python"
    ]
    assert len(new_agent.get_conversation_history()) == checkpoint.message_count == 4


def test_seed_custom_calculate_replaces_the_built_in(session, log_records):
    calls = []

    def calculate(expression: str) -> str:
        """Calculate mathematical expression."""
        calls.append(expression)
        return str(eval(expression))  # noqa: S307 - the seed's example tool, on the test's text

    model = DemoModel()
    agent = RollbackAgent(
        external_session_id=session.pk,
        model=model,
        tools=[calculate],
        auto_checkpoint=True,  # Auto-checkpoint after calculate
    )

    agent.run("What's 5 * 10?")  # Auto-checkpoint created

    assert calls == ["5 * 10"]
    assert agent.last_turn.tools_used == ["calculate"]
    assert agent.last_turn.checkpoint.checkpoint_name == "after-calculate"
    assert sum(getattr(t, "__name__", None) == "calculate" for t in agent.tools) == 1
    said = [r.getMessage() for r in log_records if r.name == "agents.rollback_agent"]
    assert any("'calculate'" in line and "replaces the built-in" in line for line in said), said


def test_agent_tools_setting_offers_custom_tools_and_replaces_a_built_in(
    settings, session, log_records
):
    from agents.tools import check_agent_tools
    from tests.agents import custom_tools
    from tests.conftest import ask

    settings.AGENT_TOOLS = [
        "tests.agents.custom_tools.calculate",
        "tests.agents.custom_tools.shout",
    ]
    check_agent_tools()  # what the start runs
    said = [r.getMessage() for r in log_records]
    assert any("AGENT_TOOLS" in line and "replaces the built-in" in line for line in said)
    custom_tools.CALLS.clear()
    turn = ask(session, "calculate 6*7")  # a turn as the web and the API run it
    assert turn.status == "done"
    assert turn.tools_used == ["calculate"]
    assert custom_tools.CALLS == ["6*7"]
    agent = RollbackAgent(session.pk, DemoModel(), skip_session_creation=True)
    names = [getattr(t, "__name__", None) for t in agent.tools]
    assert names.count("calculate") == 1
    assert "shout" in names

    # The agent's own tools win over the setting's, as the setting's win over the built-ins.
    def calculate(expression: str) -> str:
        """The agent's own."""
        return "own"

    own = RollbackAgent(session.pk, DemoModel(), skip_session_creation=True, tools=[calculate])
    assert [t for t in own.tools if getattr(t, "__name__", None) == "calculate"] == [calculate]


def test_a_replaced_checkpoint_tool_is_an_ordinary_tool_for_the_automatic_checkpoint(session):
    def create_checkpoint(name: str) -> str:
        """Someone else's checkpoints."""
        return name

    agent = RollbackAgent(session.pk, DemoModel(), tools=[create_checkpoint])
    assert "create_checkpoint" not in agent.checkpoint_tools
    assert "list_checkpoints_tool" in agent.checkpoint_tools
    assert [t for t in agent.tools if getattr(t, "__name__", None) == "create_checkpoint"] == [
        create_checkpoint
    ]


@pytest.mark.parametrize(
    "paths",
    [
        ["tests.agents.custom_tools.missing"],
        ["tests.agents.no_such_module.tool"],
        ["tests.agents.custom_tools.NOT_A_TOOL"],
        ["not a dotted path"],
    ],
)
def test_agent_tools_setting_that_cannot_be_loaded_is_a_clear_error(settings, paths):
    from django.core.exceptions import ImproperlyConfigured

    from agents.tools import check_agent_tools

    settings.AGENT_TOOLS = paths
    with pytest.raises(ImproperlyConfigured, match="AGENT_TOOLS") as caught:
        check_agent_tools()
    assert paths[0] in str(caught.value)


def _start(tmp_path, agent_tools: str):
    """`manage.py check` in a fresh process: the start, with AGENT_TOOLS from the environment."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        AGENT_TOOLS=agent_tools,
        ROLLBACK_VAR_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="rollback_site.settings",
    )
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_agent_tools_from_the_environment_are_checked_and_logged_at_the_start(tmp_path):
    good = _start(
        tmp_path, '["tests.agents.custom_tools.calculate", "tests.agents.custom_tools.shout"]'
    )
    assert good.returncode == 0, good.stderr
    assert "AGENT_TOOLS: tests.agents.custom_tools.calculate replaces the built-in tool" in (
        good.stderr + good.stdout
    )
    bad = _start(tmp_path, "tests.agents.custom_tools.shout, tests.agents.custom_tools.missing")
    assert bad.returncode != 0
    assert "AGENT_TOOLS: 'tests.agents.custom_tools.missing' could not be imported" in bad.stderr
    not_json = _start(tmp_path, '["tests.agents.custom_tools.shout"')
    assert not_json.returncode != 0
    assert "AGENT_TOOLS is not a valid JSON list" in not_json.stderr
