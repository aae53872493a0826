"""`manage.py chat`: the terminal REPL, run as a real subprocess against a fresh SQLite database
with the offline demo model answering."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import prebuilt
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

ROOT = Path(__file__).resolve().parents[2]

SETUP = """
from django.contrib.auth import get_user_model
from sessions_app.services import session_create
User = get_user_model()
User.objects.create_user("alice", password="alice-password-1")
bob = User.objects.create_user("bob", password="bob-password-1")
print("BOB_SESSION=%d" % session_create(owner=bob, name="Bob's").pk)
"""


def _run(env: dict, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(  # noqa: S603 - the test's own argument list, no shell
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    """A migrated database with users alice and bob (bob has one session). Each chat without
    --session starts a session of its own, so the tests do not see each other's data."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")
    }
    var_dir = tmp_path_factory.mktemp("chat-var")
    env.update(
        ROLLBACK_VAR_DIR=str(var_dir),
        DEMO_MODEL_WORD_DELAY="0",
        DJANGO_SETTINGS_MODULE="rollback_site.settings",
    )
    prebuilt.sqlite_database(var_dir)
    made = _run(env, "shell", "-v0", "-c", SETUP)
    assert made.returncode == 0, made.stderr
    bob_session = int(made.stdout.split("BOB_SESSION=")[1].split()[0])
    base = env

    class Cli:
        def chat(
            self,
            *lines: str,
            args: tuple[str, ...] = ("--user", "alice"),
            env: dict[str, str] | None = None,
        ):
            stdin = "".join(f"{line}\n" for line in lines)
            return _run({**base, **(env or {})}, "chat", *args, stdin=stdin)

        def shell(self, code: str):
            done = _run(base, "shell", "-v0", "-c", code)
            assert done.returncode == 0, done.stderr
            return done

    cli = Cli()
    cli.bob_session = bob_session
    return cli


def test_conversation_with_tools_and_checkpoints(cli):
    done = cli.chat(
        "hello",
        "calculate 2+3",
        "write a file notes.md saying hi",
        "/checkpoint",
        "/checkpoint first",
        "/list",
        "/history",
        "/quit",
        "this is never sent",
    )
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "offline demo model answers" in out
    assert "Session " in out
    assert "branch " in out
    assert "agent> You said: “hello”. This conversation had 0 earlier messages." in out
    assert "  [tool] calculate(expression='2+3') -> 5\n" in out
    assert "agent> The result is **5**.\n" in out
    assert out.count("agent> The result is **5**.") == 1  # streamed once, not repeated
    assert "after-calculate" not in out  # a sum changes nothing: no checkpoint after it
    assert "  [checkpoint] after-write_file (auto)\n" in out
    assert "Give the checkpoint a name" in out
    assert "✓ Checkpoint 'first' created successfully" in out
    # /list: both checkpoints, newest first.
    listing = out[out.index("Available checkpoints:") :]
    auto = listing.index("| after-write_file | Type: auto")
    assert listing.index("| first | Type: manual") < auto
    # /history: the whole branch, tool call and result included.
    history = out[out.index("Conversation (10 messages):") :]
    for line in (
        "[user] hello",
        "[user] calculate 2+3",
        "[assistant] calls calculate",
        "[tool] calculate → 5",
        "[assistant] The result is **5**.",
    ):
        assert line in history
    assert "this is never sent" not in out


def test_rollback_command_branches_and_history(cli):
    done = cli.chat(
        "hello",
        "/checkpoint start",
        "second message",
        "/history",
        "/rollback start",
        "/branches",
        "/history",
    )
    out = done.stdout
    assert done.returncode == 0, done.stderr
    before, _, after = out.partition("Rolled back to checkpoint 'start'. Now on branch ")
    assert after, out
    assert "[user] second message" in before
    assert after.split(" ", 1)[1].startswith("(2 messages).")
    new_branch = int(after.split(" ", 1)[0])
    branches = after[after.index("2 branches (* = current):") :]
    assert f"* branch {new_branch} (from branch " in branches
    assert " at message 2): 2 messages, 0 checkpoints" in branches
    assert "(root): 4 messages, 1 checkpoint" in branches
    assert branches.count("* branch") == 1
    history = after[after.index("Conversation (2 messages):") :]
    assert "[user] hello" in history
    assert "second message" not in history


def test_the_agent_rolls_back_when_asked_in_plain_words(cli):
    done = cli.chat("hello", "/checkpoint start", "roll back to start", "/branches")
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "  [tool] rollback_to_checkpoint_tool(checkpoint_id_or_name='start') -> ✓" in out
    assert "  [rollback] Rolled back to checkpoint 'start'. Now on branch " in out
    branches = out[out.index("2 branches (* = current):") :]
    assert branches.count("* branch") == 1
    assert "(from branch " in branches


def test_a_rollback_says_what_it_could_not_undo(cli):
    done = cli.chat("hello", "/checkpoint start", "remember editor: I use Helix", "/rollback start")
    assert done.returncode == 0, done.stderr
    after = done.stdout.partition("Rolled back to checkpoint 'start'.")[2]
    # The memory outlives the rollback: the terminal says so.
    assert "  [cannot undo] remember (" in after


def test_unknown_user(cli):
    done = cli.chat("hello", args=("--user", "nobody"))
    assert done.returncode != 0
    assert "No user named 'nobody'." in done.stderr
    assert "agent>" not in done.stdout


def test_another_users_session_is_not_found(cli):
    done = cli.chat("hello", args=("--user", "alice", "--session", str(cli.bob_session)))
    assert done.returncode != 0
    assert f"Session {cli.bob_session} not found." in done.stderr
    assert "agent>" not in done.stdout


def test_unknown_checkpoint_and_command_keep_the_loop_going(cli):
    done = cli.chat("/rollback nope", "/bogus", "hello", "/branches", "/quit")
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "  [error] There is no checkpoint named 'nope' in this session." in out
    assert "Unknown command /bogus." in out
    assert "/checkpoint NAME" in out  # the help
    assert "agent> You said: “hello”." in out
    assert "1 branch (* = current):" in out


def test_end_of_input_ends_cleanly(cli):
    done = cli.chat("", "   ", "hello")
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "agent> You said: “hello”. This conversation had 0 earlier messages." in out
    assert "[error]" not in out  # blank lines are not sent
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("answer", "told"), [("y", "sent to bob"), ("n", "refused")])
def test_a_call_that_needs_approval_is_asked_about_in_the_terminal(cli, llm, answer, told):
    llm.queue(ToolCalls([ToolCall("send_email", {"to": "bob", "subject": "hi"})]), Reply("Done."))
    result = cli.chat(
        "mail bob",
        answer,
        "/quit",
        env={
            "AGENT_TOOLS": "tests.agents.approval_tools.send_email",
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test-key",
        },
    )
    assert result.returncode == 0, result.stderr
    assert 'send_email({"to": "bob", "subject": "hi"}) waits for your approval.' in result.stdout
    assert "[tool] send_email" in result.stdout
    assert told in result.stdout


LIMITS = """
from decimal import Decimal
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from access.models import AccessRule
from usage.models import Budget
from usage.services import usage_record
User = get_user_model()
carol = User.objects.create_user("carol", password="carol-password-1")
Budget.objects.create(user=carol, period="month", unit="tokens", limit=Decimal(10))
usage_record(user_id=carol.pk, model="rollback-demo", input_tokens=8, output_tokens=4)
dave = User.objects.create_user("dave", password="dave-password-1")
AccessRule.objects.create(group=Group.objects.create(name="none"), all_models=False)
dave.groups.add(Group.objects.get(name="none"))
"""


def test_the_terminal_chat_refuses_a_turn_over_budget_or_without_a_model_saying_why(cli, llm):
    """The terminal `chat` is a door like the others (issue 40)."""
    cli.shell(LIMITS)
    over = cli.chat("hello", "/quit", args=("--user", "carol"))
    assert over.returncode == 0, over.stderr
    assert "Your monthly budget of 10 tokens is used up (12 tokens used)" in over.stdout
    assert "renews at" in over.stdout
    assert "agent>" not in over.stdout
    served = {"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test-key"}
    none = cli.chat("hello", "/quit", args=("--user", "dave"), env=served)
    assert none.returncode == 0, none.stderr
    assert "ask an administrator to give one of your groups a model" in none.stdout
    assert llm.requests == []
