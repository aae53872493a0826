"""Every tool call has a deadline, and Stop stops it (issue 36, agents.tool_deadline): a custom
tool that hangs, raises or returns what is not a string, through real turns against the fake
model server; the process's count of calls given up on, its bound, and /healthz."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents import tool_deadline
from agents.model import build_model
from agents.rollback_agent import RollbackAgent
from agents.services import turn_submit
from agents.tool_deadline import RESULT_CHARS, as_text
from agents.tools import tool_effect
from core.events import listen
from sessions_app.models import LedgerEntry, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import session_create
from sessions_app.turns import turn_cancel, turn_start
from tests.agents import hung_tools
from tests.conftest import ask, run_hearing
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.waits import until

HANG = "tests.agents.hung_tools.hang"


@pytest.fixture(autouse=True)
def released():
    """Every hung call returns at the test's end, and the process holds none given up on for
    the next test."""
    hung_tools.RELEASE.clear()
    hung_tools.CALLS.clear()
    yield
    hung_tools.RELEASE.set()
    until(lambda: tool_deadline.stats()["abandoned"] == 0, "the hung calls to return")


@pytest.fixture
def quick(settings):
    # Long enough for a call to start on the tool executor before its deadline: one that has
    # not started by then is never run (`✗ Not run`), which is not what these tests are about;
    # CI's loaded machine once took longer than 0.2 s to start a call's thread.
    settings.AGENT_TOOL_TIMEOUT_SECONDS = 2.0
    settings.TURN_STOP_POLL_SECONDS = 0.05


def tool_messages(session):
    return [m for m in branch_history(current_branch(session)) if m.role == "tool"]


@pytest.mark.django_db
def test_a_hung_custom_tool_past_its_deadline_gives_a_timeout_result_and_the_turn_goes_on(
    fake_llm, session, settings, quick
):
    settings.AGENT_TOOLS = [HANG]
    fake_llm.queue(ToolCalls([ToolCall("hang", {"job": "backup"}, id="call_h")]), Reply("Gave up."))
    turn = ask(session, "run the backup")
    assert turn.status == "done"
    assert turn.reply == "Gave up."
    assert turn.tools_used == []  # it did not answer: no tool ran to an end
    assert turn.checkpoint is None  # nothing to mark
    (tool,) = tool_messages(session)
    assert tool.tool_result.startswith("✗ Timeout: hang did not answer within 2 s")
    assert tool.metadata == {"error": True, "may_have_run": True}
    sent = fake_llm.messages(-1)[-1]
    assert (sent["tool_call_id"], sent["content"]) == ("call_h", tool.tool_result)
    # External (it declares nothing): the ledger says it may have run.
    (entry,) = LedgerEntry.objects.filter(session=session)
    assert (entry.tool_name, entry.status) == ("hang", "may_have_run")
    assert tool_deadline.stats()["abandoned"] == 1
    assert hung_tools.CALLS == ["backup"]


@pytest.mark.django_db
def test_a_tools_own_deadline_wins_over_the_default(fake_llm, session, settings, quick):
    settings.AGENT_TOOL_TIMEOUT_SECONDS = 600  # the call would wait ten minutes
    settings.AGENT_TOOLS = ["tests.agents.hung_tools.quick_lookup"]
    fake_llm.queue(ToolCalls([ToolCall("quick_lookup", {"order_id": "A1"})]), Reply("Slow."))
    turn = ask(session, "where is A1")
    assert turn.status == "done"
    (tool,) = tool_messages(session)
    assert tool.tool_result.startswith("✗ Timeout: quick_lookup did not answer within 2 s")
    # Declared `none`: no ledger entry, whatever it did.
    assert not LedgerEntry.objects.filter(session=session).exists()


def test_a_declared_timeout_is_a_number_of_seconds_above_0():
    for bad in (0, -1, "5", True, 10**9):
        with pytest.raises(ValueError, match="timeout"):
            tool_effect("none", timeout=bad)


@pytest.mark.django_db(transaction=True)
def test_stop_during_a_hung_tool_cancels_the_turn_abandons_the_call_and_the_next_message_does_not_run_it(  # noqa: E501
    fake_llm, session, settings, client, quick
):
    settings.AGENT_TOOL_TIMEOUT_SECONDS = 600  # only the Stop can end this wait
    settings.AGENT_TOOLS = [HANG]
    fake_llm.queue(ToolCalls([ToolCall("hang", {"job": "mkdir"}, id="call_m")]))
    turn = turn_start(session=session, message="make the directory")

    def on_event(event):
        if event["type"] == "tool.started":  # the tool runs next: the user presses Stop
            turn_cancel(turn=Turn.objects.get(pk=turn.pk))

    run_hearing(turn, on_event)
    assert turn.status == "cancelled"
    assert hung_tools.CALLS == ["mkdir"]  # it started, and still runs
    stats = tool_deadline.stats()
    assert (stats["abandoned"], stats["abandoned_total"] >= 1) == (1, True)
    body = client.get("/healthz").json()
    assert body["tools"]["abandoned"] == 1
    assert body["tools"]["full"] is False
    assert "tools" not in body["checks"]  # the server still serves: not a failed check
    # It never answered: the ledger keeps it as a call that may have run.
    (entry,) = LedgerEntry.objects.filter(session=session)
    assert (entry.tool_name, entry.status, entry.turn_ref) == ("hang", "may_have_run", turn.pk)
    # The next message of the session answers without running it again.
    fake_llm.queue(Reply("Noted."))
    after = ask(session, "ok, forget that")
    assert after.status == "done"
    assert hung_tools.CALLS == ["mkdir"]
    assert tool_deadline.stats()["abandoned"] == 1


@pytest.mark.django_db
def test_at_the_most_abandoned_calls_a_new_call_is_refused_at_once(
    fake_llm, session, settings, client, quick
):
    settings.AGENT_TOOL_MAX_ABANDONED = 1
    settings.AGENT_TOOLS = [HANG]
    fake_llm.queue(
        ToolCalls([ToolCall("hang", {"job": "one"})]),
        Reply("First gave up."),
        ToolCalls([ToolCall("hang", {"job": "two"}, id="call_2")]),
        Reply("Second refused."),
    )
    assert ask(session, "job one").status == "done"
    assert tool_deadline.stats()["abandoned"] == 1
    assert client.get("/healthz").json()["tools"] == {
        "abandoned": 1,
        "abandoned_total": tool_deadline.stats()["abandoned_total"],
        "max_abandoned": 1,
        "full": True,
        "elsewhere": [],  # no other process holds any
    }
    turn = ask(session, "job two")
    assert turn.status == "done"
    assert hung_tools.CALLS == ["one"]  # the second never started
    refused = tool_messages(session)[-1]
    assert refused.tool_result == (
        "✗ Not run: 1 earlier tool calls are still running in this process past their deadline "
        "or a Stop (the most AGENT_TOOL_MAX_ABANDONED allows), so hang was not started. Try "
        "again later."
    )
    assert refused.metadata == {"error": True}  # it did not run: not "may have run"
    statuses = dict(LedgerEntry.objects.filter(session=session).values_list("turn_ref", "status"))
    assert statuses[turn.pk] == "failed"


@pytest.mark.django_db
def test_a_custom_tool_that_raises_off_the_turns_thread_gives_the_scrubbed_error(
    fake_llm, session, settings
):
    settings.AGENT_TOOLS = ["tests.agents.custom_tools.log_in"]
    fake_llm.queue(ToolCalls([ToolCall("log_in", {"service": "billing"})]), Reply("Failed."))
    turn = ask(session, "log in")
    assert turn.status == "done"
    (tool,) = tool_messages(session)
    assert tool.tool_result.startswith("✗ RuntimeError: could not log in to billing")
    assert "hunter2" not in tool.tool_result
    assert tool.metadata == {"error": True}  # it answered (with an error): it did not hang
    assert tool_deadline.stats()["abandoned"] == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kind", "shown"),
    [
        ("dict", '{"id": "A1", "total": 3.5, "tags": ["x"]}'),
        ("list", '[1, 2, {"three": null}]'),
        ("number", "42"),
        ("nothing", "null"),
        ("bytes", "héllo"),
        ("binary", "<3 bytes of binary data>"),
        ("object", '"<Opaque thing>"'),
    ],
)
def test_a_custom_tool_that_returns_no_string_gives_text(fake_llm, session, settings, kind, shown):
    settings.AGENT_TOOLS = ["tests.agents.hung_tools.give"]
    fake_llm.queue(ToolCalls([ToolCall("give", {"kind": kind})]), Reply("Got it."))
    turn = ask(session, f"give me a {kind}")
    assert turn.status == "done"
    assert turn.tools_used == ["give"]
    (tool,) = tool_messages(session)
    assert tool.tool_result == shown
    assert fake_llm.messages(-1)[-1]["content"] == shown


def test_a_large_result_is_bounded():
    text = as_text(hung_tools.RESULTS["big"])
    assert len(text) == RESULT_CHARS
    assert text.endswith("…")
    assert json.loads(as_text({"set": {1}})) == {"set": [1]}
    cycle: list[object] = []
    cycle.append(cycle)
    assert as_text(cycle) == "[[...]]"


@pytest.mark.django_db(transaction=True)
def test_eight_tools_hung_past_stop_leave_the_pool_of_four_to_a_bystander(
    fake_llm, alice, settings, celery_eager, quick
):
    """The embedded pool runs 4 turns at once: 8 turns whose tools hang, each stopped, and
    another session's turn still answers (counted, not timed: bench/ measures the time)."""
    settings.AGENT_TOOL_TIMEOUT_SECONDS = 600
    settings.AGENT_TOOLS = [HANG]
    fake_llm.queue(*[ToolCalls([ToolCall("hang", {"job": f"job{i}"})]) for i in range(8)])
    hung = [session_create(owner=alice, name=f"hung {i}") for i in range(8)]
    # A turn whose tool starts (it holds a pool thread meanwhile) is stopped at once.
    calling: set[int] = set()
    listening = [listen(s.pk, lambda e: _note_tool(e, calling)) for s in hung]
    try:
        turns = [turn_submit(session=s, message="run the job") for s in hung]
        stopped: set[int] = set()

        def stop_started() -> bool:
            for pk in set(calling) - stopped:
                turn_cancel(turn=Turn.objects.get(pk=pk))
                stopped.add(pk)
            return len(stopped) == 8 and tool_deadline.stats()["abandoned"] == 8

        until(stop_started, "8 hung tools stopped", timeout=60)
    finally:
        for stop in listening:
            stop()
    until(
        lambda: all(Turn.objects.get(pk=t.pk).status == "cancelled" for t in turns),
        "the 8 stopped turns to end",
    )
    assert hung_tools.started() == 8
    fake_llm.queue(Reply("Hello, bystander."))
    bystander = session_create(owner=alice, name="bystander")
    turn = turn_submit(session=bystander, message="hello")
    until(
        lambda: Turn.objects.get(pk=turn.pk).status in ("done", "failed"),
        "the bystander's turn to end",
    )
    turn.refresh_from_db()
    assert (turn.status, turn.reply) == ("done", "Hello, bystander.")
    assert tool_deadline.stats()["abandoned"] == 8


def _note_tool(event, calling: set[int]) -> None:
    if event["type"] == "tool.started":
        calling.add(event["turn"])


@pytest.mark.django_db
def test_the_agents_tool_timeouts_set_a_tools_deadline_as_the_mcp_toolset_fills_them(
    fake_llm, session, settings, quick
):
    """Seed 003's API with the tool given to the agent; `tool_timeouts` filled after the agent
    was built (as the MCP toolset does at a turn's start, per server) is the call's deadline."""
    settings.AGENT_TOOL_TIMEOUT_SECONDS = 600
    agent = RollbackAgent(
        external_session_id=session.pk,
        model=build_model(),
        skip_session_creation=True,
        tools=[hung_tools.hang],
    )
    agent.tool_timeouts["hang"] = 2.0
    fake_llm.queue(ToolCalls([ToolCall("hang", {"job": "sync"})]), Reply("Timed out."))
    output = agent.run("sync it")
    assert output is not None
    assert output.content == "Timed out."
    (tool,) = tool_messages(session)
    assert tool.tool_result.startswith("✗ Timeout: hang did not answer within 2 s")


def test_a_process_holding_a_hung_tool_call_still_exits():
    """The executor's threads are daemons: an abandoned call never keeps a worker or a web
    server from stopping (concurrent.futures joins its threads at exit)."""
    code = (
        "import threading\n"
        "from agents.tool_deadline import ToolExecutor\n"
        "pool = ToolExecutor(2)\n"
        "pool.submit(threading.Event().wait)\n"
        "assert pool.submit(lambda: 7).result() == 7\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "rollback_site.settings"}
    done = subprocess.run(  # noqa: S603 - this interpreter, our code
        [sys.executable, "-c", "import django; django.setup()\n" + code],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
