"""The MCP sessions of one turn, by server: taken at the turn's first call to that server, kept
for the rest of the turn (so a tool that keeps state in its session, a toggle, a login, a
browser, works across the turn's calls), given back when the turn's attempt ends
(agents.rollback_agent.RollbackAgent.close_mcp_sessions).

- HTTP and SSE: a session of the turn's own, held open by a task of its own on the process's
  bridge loop (`core.bridge`; the SDK's transports are entered and left in one task, as anyio's
  cancel scopes require), closed at the turn's end: the next turn opens a new one. While it is
  open it hears the server's `tools/list_changed` (agents.mcp.client.connected with `listen`).
- stdio: the process's kept server process for the turn's user (agents.mcp.kept), started if
  there is none, held by the turn and released at its end, not closed: that user's next turns
  in this process (and those running at once) use the same process and session.

A call that loses the server (a timeout, a dropped connection, a process that died) closes that
session (a stdio process with it); the turn's next call to it opens a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp.types import CallToolResult

from core import bridge

from . import kept
from .catalogue import drain_changed, server_failed
from .client import McpFailure, bounded, connected

if TYPE_CHECKING:
    from mcp import Client

    from .client import Endpoint

# How long the end of a turn waits for its sessions to close.
CLOSE_SECONDS = 5.0


@dataclass
class _Held:
    client: Client
    done: asyncio.Event
    task: asyncio.Task[None]


@dataclass
class TurnSessions:
    """The open sessions of one turn, by server id."""

    held: dict[int, _Held] = field(default_factory=dict)  # HTTP and SSE: the turn's own
    stdio: dict[int, kept.Kept] = field(default_factory=dict)  # stdio: the process's, held
    # The servers that failed during the turn, with their reasons: their breaker opens when
    # the turn closes its sessions, on the turn's own thread (a call runs on the tool executor,
    # agents.tool_deadline, which must not write the database: its connection is not the
    # turn's, and under a transaction it would wait for it).
    failed: list[tuple[int, str]] = field(default_factory=list)

    def note_failed(self, server_id: int, reason: str) -> None:
        self.failed.append((server_id, reason))

    async def _open(self, endpoint: Endpoint) -> Client:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        done = asyncio.Event()

        async def hold() -> None:
            try:
                async with connected(endpoint, endpoint.timeout, listen=True) as client:
                    ready.set_result(client)
                    await done.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)

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

    async def _take(self, endpoint: Endpoint) -> kept.Kept:
        """The kept stdio process the turn holds for the server (taken now if it holds none,
        or the one it held was lost)."""
        server_id = endpoint.server_id
        held = self.stdio.get(server_id)
        if held is not None and held.usable:
            return held
        if held is not None:
            del self.stdio[server_id]
            await kept.release(held)
        taken = await kept.take(endpoint)
        other = self.stdio.get(server_id)  # a call of the turn running at once took it too
        if other is not None:
            await kept.release(taken)
            return other
        self.stdio[server_id] = taken
        return taken

    async def _call_kept(self, endpoint: Endpoint, tool: str, arguments: dict[str, Any]) -> Any:
        process = await self._take(endpoint)
        try:
            return await bounded(process.client.call_tool(tool, arguments), endpoint.timeout)
        except McpFailure as failure:
            if failure.down:  # lost, or not to be trusted: the next call starts a new one
                await kept.drop(process)
            raise

    async def _release(self, server_id: int) -> None:
        held = self.stdio.pop(server_id, None)
        if held is not None:
            await kept.release(held)

    def call(self, endpoint: Endpoint, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """One call in the turn's session with the server (opened now if it is not yet)."""

        async def one() -> Any:
            if endpoint.transport == "stdio":
                return await self._call_kept(endpoint, tool, arguments)
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
        """Close the turn's own sessions and release its kept stdio processes (at its end), then
        record what the turn learnt of its servers (failures: the breaker; `tools/list_changed`:
        a stale catalogue); never raises."""
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
        if not self.held and not self.stdio:
            return

        async def every() -> None:
            await asyncio.gather(
                *(self._drop(sid) for sid in list(self.held)),
                *(self._release(sid) for sid in list(self.stdio)),
            )

        with contextlib.suppress(Exception):
            bridge.call(every)
