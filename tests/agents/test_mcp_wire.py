"""MCP servers as users have them: the transports (streamable HTTP, SSE, stdio), the catalogue
cache, the circuit breaker, the per-server timeout, allow/deny lists and approval lists checked
against the server's tools; and the faults (a hung server, garbage, a 50 MB result, 1,000 tools,
a process that dies mid-call, a stdio command that is missing or exits at once). Real servers:
tests.fakes.mcp_server (HTTP, SSE) and tests.fakes.mcp_stdio_server (stdio, its own process)."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from mcp.client.subscriptions import SubscriptionLost

from agents.mcp import client as mcp_client
from agents.mcp.catalogue import drain_changed
from agents.mcp.config import configured_servers
from agents.mcp.services import (
    approval_check,
    forget_sync,
    mcp_catalogue_refresh,
    mcp_servers_sync,
)
from agents.mcp.toolset import McpToolset
from agents.models import McpServer
from agents.rollback_agent import RollbackAgent
from sessions_app.models import Message
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.fakes.mcp_server import FakeMcpServer
from tests.fakes.mcp_stdio_server import build as build_stdio_fake

pytestmark = pytest.mark.django_db

STDIO_SERVER = str(Path(__file__).resolve().parents[1] / "fakes" / "mcp_stdio_server.py")
TOKEN = "wire-token"  # noqa: S105 - a test server's token


def stdio_row(name: str = "local", *args: str, **fields: object) -> McpServer:
    """A row for the stdio fake. Its timeout is 120 s unless a test sets one: on CI's loaded
    two-core machine a start of the SDK's server took 15-30 s (1.2 s idle), and a listing cut
    at the default 30 s left a test that is not about timeouts with no tools at all."""
    fields.setdefault("timeout", 120)
    return McpServer.objects.create(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=[STDIO_SERVER, *args],
        **fields,
    )


def offered_tools(session) -> McpToolset:
    """The MCP tools a turn of this session is offered (RollbackAgent.attempt lists them)."""
    return RollbackAgent(session.pk, model=None, skip_session_creation=True).offer_mcp_tools()


def tool_results(turn) -> list[str]:
    rows = Message.objects.filter(branch_id=turn.branch_id, role="tool").order_by("position")
    return [m.content for m in rows]


class SilentServer:
    """Accepts connections and never answers; counts the connections it accepted."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.accepted: list[socket.socket] = []
        self.running = True
        self.thread = threading.Thread(target=self._accept, name="silent-mcp", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"

    def _accept(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(conn)

    def close(self) -> None:
        self.running = False
        self.thread.join(timeout=5)
        for conn in self.accepted:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent():
    server = SilentServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def http_server():
    with FakeMcpServer(token=TOKEN).start() as server:
        yield server


@pytest.fixture(scope="module")
def sse_server():
    with FakeMcpServer(token=TOKEN, sse=True).start() as server:
        yield server


# --- the catalogue cache and the breaker ----------------------------------------------------


def test_a_second_turn_reads_the_catalogue_and_does_not_contact_the_server(session, http_server):
    http_server.reset()
    McpServer.objects.create(
        name="tracker", url=http_server.url, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    first = offered_tools(session)
    contacted = len(http_server.seen_authorization)
    second = offered_tools(session)

    assert "tracker__lookup" in first.effects
    assert contacted > 0
    assert len(http_server.seen_authorization) == contacted  # no request for the second turn
    assert set(second.effects) == set(first.effects)
    row = McpServer.objects.get(name="tracker")
    assert "lookup" in [t["name"] for t in row.catalogue]
    assert row.last_contact is not None


def test_a_hung_server_costs_the_first_turn_its_timeout_and_later_turns_nothing(
    session, silent, settings
):
    settings.AGENT_MCP_TIMEOUT = 30
    McpServer.objects.create(name="hung", url=silent.url, timeout=1)  # its own timeout

    first = offered_tools(session)
    accepted = len(silent.accepted)
    second = offered_tools(session)

    assert first.notices == [
        "The MCP server hung is unavailable (it did not answer within 1 seconds); its tools "
        "were left out of this turn."
    ]
    assert accepted >= 1
    assert len(silent.accepted) == accepted  # the breaker is open: not contacted again
    assert second.notices == first.notices
    row = McpServer.objects.get(name="hung")
    assert row.down_until > timezone.now()
    assert row.failures == 1
    assert row.last_error == "it did not answer within 1 seconds"


def test_a_refresh_closes_the_breaker_of_a_server_that_answers_again(session, http_server):
    row = McpServer.objects.create(
        name="back",
        url=http_server.url,
        headers={"Authorization": f"Bearer {TOKEN}"},
        failures=3,
        down_until=timezone.now() + timezone.timedelta(hours=1),
        last_error="it could not be reached",
    )
    assert offered_tools(session).notices  # skipped while the breaker is open

    outcome = mcp_catalogue_refresh(names=["back"])

    row.refresh_from_db()
    assert outcome["back"].startswith("ok, ")
    assert row.down_until is None
    assert row.failures == 0
    assert "back__lookup" in offered_tools(session).effects


# --- transports -----------------------------------------------------------------------------


def test_an_sse_server_runs_a_tool_in_a_real_turn(fake_llm, session, sse_server):
    sse_server.reset()
    McpServer.objects.create(
        name="ssesrv",
        transport="sse",
        url=sse_server.url,
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    fake_llm.queue(ToolCalls([ToolCall("ssesrv__lookup", {"query": "wire"})]), Reply("Done."))

    turn = ask(session, "look it up")

    assert turn.status == "done"
    assert tool_results(turn) == ["definition of wire"]
    assert sse_server.calls == [("lookup", {"query": "wire"})]


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_an_http_or_sse_servers_tools_list_changed_during_a_turn_is_heard(
    fake_llm, session, transport
):
    # A 2026-era server says it only on a `subscriptions/listen` stream, which the turn's
    # session opens: the next turn lists the server again and is offered the new tool.
    with FakeMcpServer(token=TOKEN, sse=transport == "sse", grows=True).start() as server:
        McpServer.objects.create(
            name="growing",
            transport=transport,
            url=server.url,
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert "growing__extra" not in offered_tools(session).effects
        fake_llm.queue(ToolCalls([ToolCall("growing__grow", {})]), Reply("Grown."))

        turn = ask(session, "grow")

        assert tool_results(turn) == ["grown"]
        assert "growing__extra" in offered_tools(session).effects
        assert "extra" in [t["name"] for t in McpServer.objects.get(name="growing").catalogue]


class _LosesItsFirstStream:
    """A 2026-era session (the SDK's client, as far as listening goes) whose first
    `subscriptions/listen` stream drops before it says anything; the second closes cleanly."""

    protocol_version = "2026-07-28"
    server_capabilities = SimpleNamespace(tools=SimpleNamespace(list_changed=True))

    def __init__(self) -> None:
        self.opened = 0

    @asynccontextmanager
    async def listen(self, **_filters: object) -> AsyncIterator[AsyncIterator[object]]:
        self.opened += 1
        if self.opened == 1:
            raise SubscriptionLost("the stream ended")

        async def nothing() -> AsyncIterator[object]:
            return
            yield

        yield nothing()


def test_a_lost_listen_stream_is_opened_again_and_the_catalogue_listed_again(
    session, http_server, monkeypatch
):
    # What the server said while its stream was away was not heard: the catalogue is stale.
    monkeypatch.setattr(mcp_client, "RELISTEN_SECONDS", 0)
    row = McpServer.objects.create(
        name="tracker", url=http_server.url, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    offered_tools(session)
    assert McpServer.objects.get(pk=row.pk).catalogue
    client = _LosesItsFirstStream()

    asyncio.run(mcp_client.hear_changes(client, row.pk))
    drain_changed()

    assert client.opened == 2
    assert McpServer.objects.get(pk=row.pk).catalogue is None


def test_a_stdio_server_runs_a_tool_in_a_real_turn_and_hides_an_app_only_tool(fake_llm, session):
    stdio_row()
    fake_llm.queue(ToolCalls([ToolCall("local__echo", {"text": "hi"})]), Reply("Done."))

    turn = ask(session, "echo")

    assert turn.status == "done"
    assert tool_results(turn) == ["echo: hi"]
    offered = {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    assert "local__echo" in offered
    assert "local__app_only" not in offered  # _meta.ui.visibility: ["app"]


def test_a_tool_named_like_a_built_in_never_shadows_it(session):
    stdio_row()
    agent = RollbackAgent(session.pk, model=None, skip_session_creation=True)
    tools = agent.offer_mcp_tools()

    assert agent.tool_effects["write_file"] == "workspace"  # the built-in, unchanged
    assert "write_file" not in tools.effects
    assert "local__write_file" in tools.effects


@pytest.mark.parametrize(
    ("command", "args", "reason"),
    [
        ("/nonexistent/mcp-server", [], "its command was not found"),
        (sys.executable, [STDIO_SERVER, "exit"], None),
    ],
)
def test_a_stdio_command_missing_or_exiting_at_once_leaves_a_notice(session, command, args, reason):
    McpServer.objects.create(
        name="broken", transport="stdio", command=command, args=args, timeout=5
    )
    tools = offered_tools(session)

    [notice] = tools.notices
    assert notice.startswith("The MCP server broken is unavailable (")
    if reason:
        assert f"({reason})" in notice
    row = McpServer.objects.get(name="broken")
    assert row.last_error
    assert row.down_until is not None


def test_a_stdio_servers_session_keeps_its_state_within_a_turn_and_across_turns(fake_llm, session):
    stdio_row()
    fake_llm.queue(
        ToolCalls([ToolCall("local__counter", {})]),
        ToolCalls([ToolCall("local__counter", {})]),
        Reply("Counted."),
        ToolCalls([ToolCall("local__counter", {})]),
        Reply("Again."),
    )

    ask(session, "count twice")
    turn = ask(session, "count once")

    # One process and session, kept by the worker for its next turns (agents.mcp.kept;
    # tests/agents/test_mcp_kept.py).
    assert tool_results(turn) == ["1", "2", "3"]


def test_a_session_lost_mid_turn_is_opened_again_by_the_next_call(fake_llm, session):
    stdio_row()
    fake_llm.queue(
        ToolCalls([ToolCall("local__counter", {})]),
        ToolCalls([ToolCall("local__die", {})]),
        ToolCalls([ToolCall("local__counter", {})]),
        Reply("Restarted."),
    )

    turn = ask(session, "count, die, count")

    results = tool_results(turn)
    assert results[0] == "1"
    assert results[1].endswith("it may have run.")
    # The lost call opens the breaker for later turns; within the turn the next call starts
    # the process again (a new session), whose count starts anew.
    assert results[2] == "1"


# --- faults ---------------------------------------------------------------------------------


def test_a_stdio_server_writing_a_garbage_line_still_offers_its_tools(session):
    stdio_row("noisy", "garbage")
    tools = offered_tools(session)
    # The SDK skips a line that is not JSON-RPC; the server's tools are offered.
    assert "noisy__echo" in tools.effects
    assert tools.notices == []


class GarbageHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = b"<html>this is not an MCP server</html>"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_an_http_server_answering_garbage_leaves_a_notice_and_opens_the_breaker(session):
    server = ThreadingHTTPServer(("127.0.0.1", 0), GarbageHandler)
    thread = threading.Thread(target=server.serve_forever, name="garbage-mcp", daemon=True)
    thread.start()
    try:
        McpServer.objects.create(
            name="junk", url=f"http://127.0.0.1:{server.server_address[1]}/mcp", timeout=3
        )
        tools = offered_tools(session)
    finally:
        server.shutdown()
        thread.join(timeout=5)

    [notice] = tools.notices
    assert notice.startswith(
        "The MCP server junk is unavailable (it answered with an error: Failed to parse JSON"
    )
    assert "\n" not in notice
    assert not any(n.startswith("junk__") for n in tools.effects)
    assert McpServer.objects.get(name="junk").down_until is not None


@pytest.fixture(scope="module")
def big_server():
    """The stdio fake's tools served over streamable HTTP (a 50 MB line over stdio takes the
    SDK's reader minutes: there it ends at the server's timeout)."""
    fake = FakeMcpServer(token=TOKEN)
    fake.mcp = build_stdio_fake("")
    with fake.start() as server:
        yield server


def test_a_50_mb_result_is_cut_with_a_note(fake_llm, session, settings, big_server):
    settings.AGENT_MCP_MAX_RESULT_CHARS = 1000
    McpServer.objects.create(
        name="local",
        url=big_server.url,
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=120,
    )
    fake_llm.queue(ToolCalls([ToolCall("local__big", {"megabytes": 50})]), Reply("Long."))

    turn = ask(session, "big")

    [result] = tool_results(turn)
    assert result.endswith("(the result was cut at 1000 characters)")
    assert len(result) < 1100


def test_a_server_listing_1000_tools_offers_the_first_allowed_ones(session, settings):
    settings.AGENT_MCP_MAX_TOOLS = 100
    stdio_row("many", "many")
    tools = offered_tools(session)

    offered = [n for n in tools.effects if n.startswith("many__")]
    assert len(offered) == 100
    assert len(McpServer.objects.get(name="many").catalogue) == 1000  # the first 1,000 kept


def test_a_server_process_that_dies_mid_call_may_have_run(fake_llm, session):
    stdio_row()
    fake_llm.queue(ToolCalls([ToolCall("local__die", {})]), Reply("It died."))

    turn = ask(session, "die")

    assert turn.status == "done"
    [result] = tool_results(turn)
    assert result.startswith("✗ local__die failed: ")
    assert result.endswith("it may have run.")
    assert McpServer.objects.get(name="local").down_until is not None


# --- allow, deny, approval ------------------------------------------------------------------


def test_allow_and_deny_lists_choose_the_tools_offered(session):
    stdio_row("a", allow=["echo", "a__counter"])
    stdio_row("d", deny=["d__echo", "die"])
    tools = offered_tools(session)

    assert sorted(n for n in tools.effects if n.startswith("a__")) == [
        "a__counter",
        "a__echo",
    ]
    d = {n for n in tools.effects if n.startswith("d__")}
    assert "d__echo" not in d
    assert "d__die" not in d
    assert "d__counter" in d


def test_an_approval_name_is_checked_against_the_servers_tools_either_spelling(session):
    row = stdio_row()
    assert approval_check(row, ["nope"], where="admin") == ["nope"]  # not known yet: kept
    mcp_catalogue_refresh(names=["local"])
    row.refresh_from_db()

    assert approval_check(row, ["echo", "local__counter"], where="admin") == [
        "echo",
        "local__counter",
    ]
    with pytest.raises(ImproperlyConfigured) as refused:
        approval_check(row, ["local__nope"], where="admin")
    assert "local__nope" in str(refused.value)
    assert "counter, echo" in str(refused.value)


def test_an_unknown_approval_name_in_the_setting_is_refused_once_the_catalogue_is_known(
    session, settings
):
    stdio_row()
    mcp_catalogue_refresh(names=["local"])
    settings.AGENT_MCP_SERVERS = (
        f'[{{"name": "local", "command": "{sys.executable}", "approval": ["nope"]}}]'
    )
    forget_sync()

    with pytest.raises(ImproperlyConfigured, match="nope, not among its tools"):
        mcp_servers_sync(entries=configured_servers())


def test_an_unknown_approval_name_before_the_first_listing_is_recorded_at_it(session):
    stdio_row(approval=["local__nope"])
    mcp_catalogue_refresh(names=["local"])

    row = McpServer.objects.get(name="local")
    assert row.last_error.startswith("approval names local__nope are not among its tools")


def test_the_setting_takes_each_transport(settings):
    settings.AGENT_MCP_SERVERS = (
        '[{"name": "t", "command": "uvx", "args": ["mcp-server-time"], "timeout": 5},'
        ' {"name": "s", "transport": "sse", "url": "http://127.0.0.1:1/sse"},'
        ' {"name": "h", "url": "http://127.0.0.1:1/mcp", "deny": ["x"]}]'
    )
    t, s, h = configured_servers()
    assert (t.transport, t.command, t.args, t.timeout) == ("stdio", "uvx", ["mcp-server-time"], 5)
    assert s.transport == "sse"
    assert h.transport == "http"
    assert h.deny == ["x"]


def test_the_setting_saves_a_row_only_when_it_changes_it(settings):
    """Every process syncs the setting at its first use: an unchanged row keeps its config
    version, so the stdio processes other workers keep for it are not closed."""
    settings.AGENT_MCP_SERVERS = (
        '[{"name": "t", "command": "uvx", "args": ["mcp-server-time"], '
        '"env": {"TZ": "UTC"}, "headers": {"X-A": "1"}}]'
    )
    (first,) = mcp_servers_sync(entries=configured_servers())
    (again,) = mcp_servers_sync(entries=configured_servers())
    assert again.updated_at == first.updated_at
    assert McpServer.objects.get(name="t").updated_at == first.updated_at

    settings.AGENT_MCP_SERVERS = '[{"name": "t", "command": "uvx", "args": ["mcp-server-git"]}]'
    (changed,) = mcp_servers_sync(entries=configured_servers())
    assert changed.updated_at > first.updated_at
    assert McpServer.objects.get(name="t").args == ["mcp-server-git"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('{"name": "x", "transport": "stdio"}', "needs a command"),
        ('{"name": "x", "transport": "ftp", "url": "http://a.b/"}', "transport must be"),
        ('{"name": "x", "url": "http://example.com/mcp", "timeout": 0}', "timeout must be"),
        ('{"name": "x", "command": "a", "env": {"A": 1}}', "env must be"),
        ('{"name": "x", "command": "a", "args": "b"}', "args must be"),
    ],
)
def test_a_bad_transport_entry_is_refused_naming_it(settings, entry, message):
    settings.AGENT_MCP_SERVERS = f"[{entry}]"
    with pytest.raises(ImproperlyConfigured, match=message):
        configured_servers()
