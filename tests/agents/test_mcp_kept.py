"""A stdio MCP server is one process kept by the worker process and reused by its turns
(agents.mcp.kept): started again when it dies, at most AGENT_MCP_MAX_STDIO of them (an idle one
closed for a new one, a clear failure when every one is in use), closed after
AGENT_MCP_STDIO_IDLE_SECONDS unused and when its row changes; one per set of credentials; its
`tools/list_changed` marks the catalogue stale, and the next turn lists it again from the same
process. Real processes: tests.fakes.mcp_stdio_server (the 2.x SDK, a 2026-era server) and
tests.fakes.mcp_legacy_server (the 1.x SDK of .venv-mcp, a handshake-era one)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from agents.mcp import kept
from agents.mcp.client import Endpoint
from agents.mcp.credentials import mcp_credentials_set
from agents.mcp.services import mcp_catalogue_refresh, mcp_server_save
from agents.mcp.sessions import TurnSessions
from agents.models import McpServer
from sessions_app.services import session_create
from tests.agents.test_mcp_wire import offered_tools, stdio_row, tool_results
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.waits import until

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
LEGACY_SERVER = ROOT / "tests" / "fakes" / "mcp_legacy_server.py"
LEGACY_PYTHON = ROOT / ".venv-mcp" / "bin" / "python"


def alive(pid: int) -> bool:
    """Whether the process runs (an exited child not yet reaped is not running)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def pid_turn(fake_llm, session, server: str = "local") -> str:
    fake_llm.queue(ToolCalls([ToolCall(f"{server}__pid", {})]), Reply("Its pid."))
    turn = ask(session, "your pid?")
    assert turn.status == "done"
    return tool_results(turn)[-1]  # the branch's last tool message: this turn's


def pid_of(sessions: TurnSessions, row: McpServer, user_id: int = 0) -> int:
    """One call of a turn (its TurnSessions) to the server's `pid` tool, as `user_id`'s."""
    result = sessions.call(Endpoint.of(row, user_id=user_id), "pid", {})
    return int(result.content[0].text)


# --- kept and reused ---------------------------------------------------------------------------


def test_two_turns_in_a_row_use_one_process(fake_llm, session):
    stdio_row()

    first = pid_turn(fake_llm, session)
    second = pid_turn(fake_llm, session)

    assert first == second
    assert alive(int(first))
    assert kept.running() == 1


def test_a_process_killed_between_turns_is_started_again_by_the_next_call(fake_llm, session):
    stdio_row()
    first = int(pid_turn(fake_llm, session))

    os.kill(first, signal.SIGKILL)
    until(lambda: not alive(first), "the killed process to be gone")
    second = int(pid_turn(fake_llm, session))

    # The probe of the idle process found it dead: a new one answered, nothing failed.
    assert second != first
    assert alive(second)
    assert McpServer.objects.get(name="local").down_until is None
    assert kept.running() == 1


def test_turns_running_at_once_share_the_process_and_its_session(session):
    row = stdio_row()
    endpoint = Endpoint.of(row)
    warm = TurnSessions()
    pid_of(warm, row)
    warm.close()  # started, then idle
    answers: list[str] = []

    def turn() -> None:
        sessions = TurnSessions()
        answers.append(sessions.call(endpoint, "wait", {"seconds": 1.5}).content[0].text)
        sessions.close()

    started = time.monotonic()
    threads = [threading.Thread(target=turn) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    took = time.monotonic() - started

    assert len(answers) == 2
    assert answers[0] == answers[1]  # one process
    assert took < 2.9  # side by side in one session, not one after the other
    assert kept.running() == 1


# --- the bound, the idle time, the row ---------------------------------------------------------


def test_at_the_bound_the_idle_process_least_recently_used_is_closed(session, settings):
    settings.AGENT_MCP_MAX_STDIO = 2
    a, b, c = stdio_row("a"), stdio_row("b"), stdio_row("c")
    first, second = TurnSessions(), TurnSessions()
    pid_a = pid_of(first, a)
    pid_b = pid_of(second, b)
    first.close()  # a's turn ends first: a is the least recently used
    second.close()

    pid_c = pid_of(TurnSessions(), c)

    until(lambda: not alive(pid_a), "the least recently used process to close")
    assert alive(pid_b)
    assert alive(pid_c)
    assert kept.running() == 2


def test_at_the_bound_with_every_process_in_use_a_call_fails_clearly(fake_llm, session, settings):
    settings.AGENT_MCP_MAX_STDIO = 1
    a = stdio_row("a")
    stdio_row("b")
    stdio_row("c")
    mcp_catalogue_refresh(names=["b"])  # b's process, left idle: closed for a's below
    running = TurnSessions()
    pid_of(running, a, session.owner_id)  # a turn of the user's, still running, holds a's
    fake_llm.queue(ToolCalls([ToolCall("b__echo", {"text": "hi"})]), Reply("No room."))

    turn = ask(session, "echo")
    running.close()

    assert turn.status == "done"
    assert tool_results(turn) == [
        "✗ b__echo failed: this worker already runs 1 stdio servers (AGENT_MCP_MAX_STDIO)."
    ]
    # c was never listed: its listing met the bound too, and says so.
    assert turn.metadata["notices"] == [
        "The MCP server c is unavailable (this worker already runs 1 stdio servers "
        "(AGENT_MCP_MAX_STDIO)); its tools were left out of this turn."
    ]
    # Not the servers' fault: no breaker opens.
    assert McpServer.objects.filter(down_until__isnull=False).count() == 0


def test_a_process_unused_for_the_idle_time_is_closed_and_one_in_use_is_not(session, settings):
    settings.AGENT_MCP_STDIO_IDLE_SECONDS = 0.5
    idle_row, busy_row = stdio_row("idle"), stdio_row("busy")
    done, running = TurnSessions(), TurnSessions()
    idle = pid_of(done, idle_row)
    busy = pid_of(running, busy_row)
    done.close()

    until(lambda: not alive(idle), "the idle process to close")
    time.sleep(1.0)  # twice the idle time: the held one stays
    assert alive(busy)
    assert kept.running() == 1
    running.close()
    until(lambda: not alive(busy), "the released process to close")


def test_two_users_never_share_a_process_even_with_no_credentials(fake_llm, session, bob):
    """What a server keeps in its session (here its counter) is never another user's."""
    stdio_row()
    bobs = session_create(owner=bob, name="bob's")

    def count(on) -> str:
        fake_llm.queue(ToolCalls([ToolCall("local__counter", {})]), Reply("Counted."))
        return tool_results(ask(on, "count"))[-1]

    assert [count(session), count(bobs), count(session), count(bobs)] == ["1", "1", "2", "2"]
    assert pid_turn(fake_llm, session) != pid_turn(fake_llm, bobs)
    assert kept.running() == 2


def test_a_listing_for_no_user_keeps_no_process(session):
    """The scheduled refresh and "Test connection" list a stdio server for nobody's turn: its
    process is closed once listed, and takes no place under the bound."""
    stdio_row()
    mcp_catalogue_refresh(names=["local"])

    assert McpServer.objects.get(name="local").catalogue
    until(lambda: kept.running() == 0, "the listing's process to close")


def test_a_stdio_server_gets_each_users_own_value_in_its_environment(fake_llm, session, bob):
    """A stdio server asking each user for a value (`user_headers` names its variables) starts
    with that user's value in its environment; a user who gave none is not offered it."""
    row = stdio_row(user_headers=["TOKEN"], env={"TOKEN": "the operator's"})
    mcp_credentials_set(user=session.owner, server=row, headers={"TOKEN": "alice-token-1"})
    bobs = session_create(owner=bob, name="bob's")
    fake_llm.queue(ToolCalls([ToolCall("local__token", {})]), Reply("Your token."))

    assert tool_results(ask(session, "my token?")) == ["alice-token-1"[::-1]]
    fake_llm.queue(Reply("No such tool for you."))
    ask(bobs, "my token?")
    assert "local__token" not in {t["function"]["name"] for t in fake_llm.requests[-1]["tools"]}


def test_users_with_different_credentials_never_share_a_process(fake_llm, session, bob):
    row = stdio_row(user_headers=["X-Token"])
    mcp_credentials_set(user=session.owner, server=row, headers={"X-Token": "alice-token-1"})
    mcp_credentials_set(user=bob, server=row, headers={"X-Token": "bob-token-22"})
    bobs = session_create(owner=bob, name="bob's")

    alices = pid_turn(fake_llm, session)
    bobs_pid = pid_turn(fake_llm, bobs)
    again = pid_turn(fake_llm, session)

    assert alices != bobs_pid
    assert again == alices
    assert kept.running() == 2


def test_a_changed_row_closes_its_process_and_a_disabled_one_too(fake_llm, session):
    row = stdio_row()
    other = stdio_row("other")
    first = int(pid_turn(fake_llm, session))
    first_other = int(pid_turn(fake_llm, session, "other"))

    row.timeout = 150  # changed from the helper's 120
    mcp_server_save(server=row)  # as the admin saves it
    second = int(pid_turn(fake_llm, session))

    assert second != first
    assert not alive(first)
    assert alive(first_other)

    other.enabled = False
    mcp_server_save(server=other)
    fake_llm.queue(Reply("Hello."))
    ask(session, "hello")  # the next turn's start closes it

    assert not alive(first_other)
    assert alive(second)
    assert kept.running() == 1


# --- tools/list_changed ------------------------------------------------------------------------


def test_a_servers_tools_list_changed_lists_its_tools_again_from_the_same_process(
    fake_llm, session
):
    stdio_row()
    first = pid_turn(fake_llm, session)
    fake_llm.queue(ToolCalls([ToolCall("local__grow", {})]), Reply("Grown."))
    ask(session, "grow")

    tools = offered_tools(session)

    assert "local__extra" in tools.effects  # only that process has it
    assert "extra" in [t["name"] for t in McpServer.objects.get(name="local").catalogue]
    assert pid_turn(fake_llm, session) == first


def test_a_change_said_between_turns_is_seen_by_the_next_turn(fake_llm, session, tmp_path):
    stdio_row()
    signal_file = tmp_path / "grow"
    fake_llm.queue(
        ToolCalls([ToolCall("local__grow_when", {"path": str(signal_file)})]), Reply("Later.")
    )
    ask(session, "grow when told")
    assert "local__later" not in offered_tools(session).effects

    signal_file.touch()  # the server adds the tool and says so, between turns

    # No turn ended since: a turn's start reads what the server said.
    until(lambda: "local__later" in offered_tools(session).effects, "the new tool")


def test_a_handshake_era_server_says_its_tools_changed_on_the_session(fake_llm, session):
    if not LEGACY_PYTHON.exists():
        pytest.fail(".venv-mcp is missing: `make install` builds it", pytrace=False)
    McpServer.objects.create(
        name="legacy", transport="stdio", command=str(LEGACY_PYTHON), args=[str(LEGACY_SERVER)]
    )
    fake_llm.queue(ToolCalls([ToolCall("legacy__pid", {})]), Reply("Its pid."))
    first = tool_results(ask(session, "pid"))
    fake_llm.queue(ToolCalls([ToolCall("legacy__grow", {})]), Reply("Grown."))
    ask(session, "grow")

    assert "legacy__extra" in offered_tools(session).effects
    fake_llm.queue(ToolCalls([ToolCall("legacy__pid", {})]), Reply("Its pid."))
    assert tool_results(ask(session, "pid again"))[-1] == first[-1]  # the same process
