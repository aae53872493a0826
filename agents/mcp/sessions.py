"""One MCP session per server per turn: opened at the turn's first call to that server, kept
for the rest of the turn (so a tool that keeps state in its session, a toggle, a login, a
browser, works across the turn's calls; a stdio server is one process for the turn), closed when
the turn's attempt ends (agents.rollback_agent.RollbackAgent.close_mcp_sessions).

Each session is held open by a task of its own on the process's bridge loop (`core.bridge`):
the SDK's transports are entered and left in one task (anyio's cancel scopes require it), so the
task enters `connected(...)`, hands the client over, and waits for the turn's end. A call that
loses the server (a timeout, a dropped connection, a process that died) closes that session; the
turn's next call to it opens a new one. Nothing holds across turns but the catalogue cache and
the breaker (agents.mcp.catalogue): a new turn is a new session.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings
from mcp.types import CallToolResult

from core import bridge

from .catalogue import server_failed
from .client import McpFailure, bounded, connected, drain_changed

if TYPE_CHECKING:
    from mcp import Client

    from .client import Endpoint

# How long the end of a turn waits for its sessions to close (a stdio process to exit).
CLOSE_SECONDS = 5.0
# The stdio server processes this process runs now (every turn's), counted on the bridge loop.
_stdio_running = 0


def stdio_running() -> int:
    return _stdio_running


@dataclass
class _Held:
    client: Client
    done: asyncio.Event
    task: asyncio.Task[None]


@dataclass
class TurnSessions:
    """The open sessions of one turn, by server id."""

    held: dict[int, _Held] = field(default_factory=dict)
    # The servers that failed during the turn, with their reasons: their breaker opens when
    # the turn closes its sessions, on the turn's own thread (a call runs on the tool executor,
    # agents.tool_deadline, which must not write the database: its connection is not the
    # turn's, and under a transaction it would wait for it).
    failed: list[tuple[int, str]] = field(default_factory=list)

    def note_failed(self, server_id: int, reason: str) -> None:
        self.failed.append((server_id, reason))

    async def _open(self, endpoint: Endpoint) -> Client:
        stdio = endpoint.transport == "stdio"
        limit = int(getattr(settings, "AGENT_MCP_MAX_STDIO", 8))
        if stdio and _stdio_running >= limit:
            raise McpFailure(
                f"this worker already runs {limit} stdio servers (AGENT_MCP_MAX_STDIO)", down=False
            )
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        done = asyncio.Event()

        async def hold() -> None:
            global _stdio_running
            _stdio_running += stdio
            try:
                async with connected(endpoint, endpoint.timeout) as client:
                    ready.set_result(client)
                    await done.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
            finally:
                _stdio_running -= stdio

        task = asyncio.create_task(hold(), name=f"mcp-session-{endpoint.name}")
        try:
            client: Client = await bounded(asyncio.shield(ready), endpoint.timeout)
        except McpFailure:
            done.set()
            task.cancel()
            raise
        self.held[endpoint.server_id] = _Held(client, done, task)
        return client

    async def _drop(self, server_id: int) -> None:
        held = self.held.pop(server_id, None)
        if held is None:
            return
        held.done.set()
        try:
            await asyncio.wait_for(held.task, CLOSE_SECONDS)
        except (TimeoutError, Exception):
            held.task.cancel()

    def call(self, endpoint: Endpoint, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """One call in the turn's session with the server (opened now if it is not yet)."""

        async def one() -> Any:
            held = self.held.get(endpoint.server_id)
            if held is not None and held.task.done():  # the session ended (the process died)
                await self._drop(endpoint.server_id)
                held = None
            client = held.client if held is not None else await self._open(endpoint)
            try:
                result = await bounded(client.call_tool(tool, arguments), endpoint.timeout)
            except McpFailure as failure:
                if failure.down:
                    await self._drop(endpoint.server_id)
                raise
            return result

        result = bridge.call(one)
        if not isinstance(result, CallToolResult):
            raise McpFailure(f"it answered with {type(result).__name__}, not a tool result")
        return result

    def close(self) -> None:
        """Close every session of the turn (at its end), then record what the turn learnt of
        its servers (failures: the breaker; `tools/list_changed`: a stale catalogue); never
        raises."""
        try:
            self._close_held()
        finally:
            failed, self.failed = self.failed, []
            for server_id, reason in failed:
                with contextlib.suppress(Exception):
                    server_failed(server_id=server_id, reason=reason)
            with contextlib.suppress(Exception):
                drain_changed()

    def _close_held(self) -> None:
        if not self.held:
            return

        async def every() -> None:
            await asyncio.gather(*(self._drop(sid) for sid in list(self.held)))

        with contextlib.suppress(Exception):
            bridge.call(every)
