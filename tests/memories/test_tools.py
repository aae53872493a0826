"""The agent's memory tools through the product: turns against the real local Chat Completions
server (the model calls `remember`, then `recall`), the offline demo model's plain phrases, the
L0 lines the system prompt carries, and memories outliving a rewind of the turn that made them."""

from __future__ import annotations

import json

import pytest

from agents.rollback_agent import RollbackAgent
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create, checkpoint_restore
from memories.models import Memory
from memories.services import memory_create
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import session_create
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

pytestmark = pytest.mark.django_db(transaction=True)


def tool_results(session) -> list[str]:
    return [m.tool_result for m in branch_history(current_branch(session)) if m.role == "tool"]


def system_prompt(body: dict) -> str:
    return "\n".join(
        m.get("content") or ""
        for m in body["messages"]
        if m["role"] in ("system", "developer") and isinstance(m.get("content"), str)
    )


def test_the_model_remembers_in_one_turn_and_recalls_in_another(fake_llm, session, alice):
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall(
                    "remember",
                    {
                        "key": "Editor",
                        "category": "environment",
                        "l0": "Uses Helix as their editor",
                        "l1": "Switched from Vim in 2023. Likes modal editing.",
                        "l2": "Config in `~/.config/helix/config.toml`.",
                    },
                )
            ]
        ),
        Reply("Noted."),
    )
    turn = ask(session, "I use Helix, remember that")
    assert turn.status == "done"
    assert turn.tools_used == ["remember"]
    memory = Memory.objects.get(user=alice)
    assert (memory.key, memory.category, memory.l0_abstract) == (
        "editor",
        "Environment",
        "Uses Helix as their editor",
    )
    assert tool_results(session)[-1].startswith("✓ Remembered 'editor' (Environment)")
    # Like any tool but the checkpoint tools, it ends the turn with an automatic checkpoint
    # (the contract's rule); restoring that checkpoint would not erase the memory.
    assert Checkpoint.objects.get(pk=turn.checkpoint_id).checkpoint_name == "after-remember"

    fake_llm.queue(
        ToolCalls([ToolCall("recall", {"query": "which editor"})]),
        ToolCalls([ToolCall("recall", {"key": "EDITOR"})]),
        Reply("You use Helix."),
    )
    turn = ask(session, "What editor do I use?")
    assert turn.status == "done"
    assert turn.reply == "You use Helix."
    listed, in_full = tool_results(session)[-2:]
    assert listed.splitlines()[0] == "1. [editor] (Environment) Uses Helix as their editor"
    assert "Overview: Switched from Vim in 2023." in in_full
    assert "Config in `~/.config/helix/config.toml`." in in_full
    memory.refresh_from_db()
    assert memory.access_count == 2  # each recall that returned it counted once


def test_a_bad_remember_is_a_readable_tool_error_and_writes_nothing(fake_llm, session, alice):
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("remember", {"key": "x", "category": "Gossip", "l0": "a fact"}),
                ToolCall("remember", {"key": "y", "category": "Project", "l0": "z" * 201}),
                ToolCall("remember", {"key": "two words", "category": "Project", "l0": "a"}),
            ]
        ),
        Reply("Sorry."),
    )
    turn = ask(session, "remember these")
    assert turn.status == "done"
    results = tool_results(session)
    assert results[0].startswith("✗ Could not remember it: Unknown category 'Gossip'")
    assert "the limit is 200" in results[1]
    assert "short identifier" in results[2]
    assert not Memory.objects.exists()


def test_the_system_prompt_carries_the_relevant_l0_lines_within_the_budget(
    fake_llm, session, alice, bob, settings
):
    settings.MEMORY_PROMPT_CHARS = 300
    memory_create(user=alice, key="editor", category="Environment", l0_abstract="Uses Helix")
    for i in range(40):
        memory_create(user=alice, key=f"fact-{i}", category="Project", l0_abstract=f"Fact {i}")
    memory_create(user=bob, key="secret", category="Security", l0_abstract="Bob's PIN is 1234")
    fake_llm.queue(Reply("Helix."))
    assert ask(session, "Which editor do I like?").status == "done"
    prompt = system_prompt(fake_llm.requests[-1])
    block = prompt.split("<user_memories>", 1)[1].split("</user_memories>", 1)[0]
    lines = [line for line in block.splitlines() if line.startswith("- [")]
    assert lines[0] == "- [editor] (Environment) Uses Helix"  # the relevant one first
    assert 1 < len(lines) < 41
    assert sum(len(line) + 1 for line in lines) <= 300
    assert "Bob's PIN" not in json.dumps(fake_llm.requests[-1])


def test_no_memories_no_block_and_a_zero_budget_sends_none(fake_llm, session, alice, settings):
    fake_llm.queue(Reply("Hi."))
    ask(session, "hello")
    assert "<user_memories>" not in system_prompt(fake_llm.requests[-1])
    memory_create(user=alice, key="editor", category="Environment", l0_abstract="Uses Helix")
    settings.MEMORY_PROMPT_CHARS = 0
    fake_llm.queue(Reply("Hi."))
    ask(session, "editor?")
    assert "Uses Helix" not in system_prompt(fake_llm.requests[-1])


def test_a_memory_survives_a_rewind_that_removes_the_turn_that_made_it(fake_llm, session, alice):
    fake_llm.queue(Reply("Hello."))
    ask(session, "hi")
    before = checkpoint_create(branch=current_branch(session), name="before")
    fake_llm.queue(
        ToolCalls([ToolCall("remember", {"key": "pet", "category": "Comm", "l0": "Has a cat"})]),
        Reply("Noted."),
    )
    ask(session, "I have a cat")
    assert len(branch_history(current_branch(session))) == 6
    checkpoint_restore(checkpoint=before, mode="rewind")
    assert len(branch_history(current_branch(session))) == 2  # the turn is gone
    assert Memory.objects.get(user=alice, key="pet").l0_abstract == "Has a cat"
    fake_llm.queue(ToolCalls([ToolCall("recall", {"query": "cat"})]), Reply("A cat."))
    ask(session, "what pet do I have?")
    assert tool_results(session)[-1].startswith("1. [pet] (Comm) Has a cat")


def test_tools_of_bobs_session_never_reach_alices_memories(fake_llm, session, alice, bob):
    memory_create(user=alice, key="editor", category="Environment", l0_abstract="Uses Helix")
    bobs = session_create(owner=bob, name="bob's")
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("recall", {"query": "helix editor"}),
                ToolCall("recall", {"key": "editor"}),
                ToolCall("remember", {"key": "editor", "category": "Project", "l0": "pwned"}),
            ]
        ),
        Reply("ok"),
    )
    ask(bobs, "recall")
    listed, in_full, saved = tool_results(bobs)
    assert listed == "No matching memories."
    assert in_full.startswith("✗ No memory with the key 'editor'")
    assert saved.startswith("✓ Remembered 'editor'")  # bob's own, a new one
    mine = Memory.objects.get(user=alice)
    assert mine.l0_abstract == "Uses Helix"
    assert mine.access_count == 0
    assert Memory.objects.get(user=bob).l0_abstract == "pwned"


# --- the offline demo model ------------------------------------------------------------------


@pytest.fixture
def demo(settings):
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = ""
    settings.DEMO_MODEL_WORD_DELAY = 0


def test_the_demo_model_remembers_and_recalls_when_asked_plainly(demo, session, alice):
    turn = ask(session, "remember editor: I use Helix, restore my config from git")
    assert turn.status == "done"
    assert turn.tools_used == ["remember"]
    memory = Memory.objects.get(user=alice)
    assert (memory.key, memory.category) == ("editor", "Project")
    assert memory.l0_abstract == "I use Helix, restore my config from git"
    ask(session, "remember comm.tone: short answers please")
    assert Memory.objects.get(key="comm.tone").category == "Comm"
    turn = ask(session, "recall helix")
    assert turn.tools_used == ["recall"]
    assert turn.reply.startswith("1. [editor] (Project) I use Helix")
    automatic = Checkpoint.objects.filter(is_auto=True).order_by("id")
    # A saved memory outlives every restore (external); looking one up changes nothing.
    assert [c.checkpoint_name for c in automatic] == ["after-remember", "after-remember (2)"]


def test_the_agent_tools_are_bound_to_the_session_owner(session, alice, bob):
    from agents.demo_model import DemoModel

    memory_create(user=alice, key="editor", category="Environment", l0_abstract="Uses Helix")
    agent = RollbackAgent(
        external_session_id=session.pk, model=DemoModel(), skip_session_creation=True
    )
    assert agent.recall("helix").startswith("1. [editor]")
    assert agent.recall(key="nope").startswith("✗")
