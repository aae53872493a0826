"""The stdio servers a process keeps: started by the first call or listing that needs one, kept
alive and reused by the next turns of the same process, started again when they die.

One pool per process, on the bridge loop (`core.bridge`): its state is touched there only
(every `async def` here runs on it), so it needs no lock. A server process is kept under a key
made of all that makes it: the server's id and config version (its row's `updated_at`), the
user whose turns use it, its command, args and env, and the headers sent for that user (the
operator's merged with the user's own, agents.mcp.access.headers_for), hashed (no secret sits in
a key). Two users never share a process, so what a server keeps in its session (a login, a
toggle) is never another user's; a listing or a check (no user) has its own.

- A turn's first call to a server takes its process (`take`) and holds it until the turn's end
  (`release`, agents.mcp.sessions); a listing holds it for the listing (one for no user, the
  scheduled refresh's or "Test connection"'s, closes it after). Turns running at once
  share it: the SDK's session carries their requests side by side (JSON-RPC ids).
- A process taken after it sat idle is probed first (`ping`; `server/discover` on a 2026-era
  connection, which has no ping): one that died or hangs is closed and a new one started. A call
  that loses it (a timeout, a broken pipe, an exit) closes it (`drop`): the next call starts one.
- At most AGENT_MCP_MAX_STDIO per process: at the bound the idle process least recently used is
  closed for a new one; when every one is in use, `McpBusy`.
- An idle process is closed after AGENT_MCP_STDIO_IDLE_SECONDS (the task `mcp-stdio-idle`), and
  once its row changed, was disabled or deleted (`sync_versions`, at each turn's start and each
  catalogue refresh: one query, made only while the process keeps one).
- `tools/list_changed`: a kept process's session hears it (agents.mcp.client.connected with
  `listen`: on the session from a handshake-era server, on a `subscriptions/listen` stream from
  a 2026-era one), also between turns. Either notes the server
  (agents.mcp.catalogue.note_changed): the next turn marks its catalogue stale and lists it again,
  from this same process.

A web request never takes one (a listing is queued to a worker: agents.check_mcp_server). A
forked child forgets its parent's processes: they are not its children.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings

from core import bridge

from .models import McpServer

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import Tool

    from .client import Endpoint

# How long closing a process may take (the SDK closes its stdin, waits, then kills its tree).
CLOSE_SECONDS = 5.0
# The longest probe of a process taken after it sat idle.
PROBE_SECONDS = 5.0
# Takes of one key that may each find its process dead before the caller is told.
TRIES = 3
IDLE_TASK = "mcp-stdio-idle"


@dataclass(eq=False)
class Kept:
    """One kept server process: its session, who holds it now, since when it is unused."""

    key: str
    name: str
    server_id: int
    version: str
    ready: asyncio.Future[Client]
    done: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    users: int = 0  # the turns and listings holding it now
    used_at: float = field(default_factory=time.monotonic)
    closed: bool = False
    retired: bool = False  # its row changed: closed once no one holds it

    @property
    def started(self) -> bool:
        return self.ready.done() and not self.ready.cancelled() and not self.ready.exception()

    @property
    def usable(self) -> bool:
        return not self.closed and self.task is not None and not self.task.done()

    @property
    def client(self) -> Client:
        return self.ready.result()


_pool: dict[str, Kept] = {}  # by key: the process a new taker gets
_running: set[Kept] = set()  # every process started and not closed (the bound counts these)
_idle_task: asyncio.Task[None] | None = None
_wake: asyncio.Event | None = None


def _forget_after_fork() -> None:
    global _idle_task, _wake
    _pool.clear()
    _running.clear()
    _idle_task = _wake = None


os.register_at_fork(after_in_child=_forget_after_fork)


def _limit() -> int:
    return int(getattr(settings, "AGENT_MCP_MAX_STDIO", 8))


def _idle_seconds() -> float:
    return float(getattr(settings, "AGENT_MCP_STDIO_IDLE_SECONDS", 300.0))


def key_of(endpoint: Endpoint) -> str:
    made = [
        endpoint.server_id,
        endpoint.user_id,
        endpoint.version,
        endpoint.command,
        list(endpoint.args),
        sorted(endpoint.env.items()),
        sorted(endpoint.headers.items()),
    ]
    return hashlib.sha256(json.dumps(made).encode()).hexdigest()


# --- on the bridge loop ------------------------------------------------------------------------


async def take(endpoint: Endpoint) -> Kept:
    """The server's kept process, held for the caller until `release`: the one running (probed
    first when it sat idle), else a new one. McpFailure when none can be had (McpBusy: every
    process this one may run is in use)."""
    from .client import McpFailure

    key = key_of(endpoint)
    for _ in range(TRIES):
        kept = _pool.get(key)
        if kept is None:
            await _make_room()
            if key in _pool:  # another taker started it meanwhile
                continue
            return await _start(key, endpoint)
        if not kept.usable:
            await drop(kept)
        elif await _reuse(kept, endpoint):
            return kept
    raise McpFailure("its process could not be kept running")


async def _reuse(kept: Kept, endpoint: Endpoint) -> bool:
    """Hold `kept` for one more taker: True; False when it proved dead (it is closed)."""
    from .client import McpFailure, bounded

    idle = kept.users == 0 and kept.started
    kept.users += 1
    kept.used_at = time.monotonic()
    try:
        await bounded(asyncio.shield(kept.ready), endpoint.timeout)  # it may be starting
        if idle:
            await bounded(_probe(kept.client), min(endpoint.timeout, PROBE_SECONDS))
    except McpFailure:
        kept.users -= 1
        if not idle:
            raise  # its start failed: the starter closed it and says why
        await drop(kept)
        return False
    return True


async def _probe(client: Client) -> None:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await client.session.send_discover(client.protocol_version)
    else:
        await client.session.send_ping()


async def _make_room() -> None:
    """Below the bound: the idle process least recently used closed, or McpBusy."""
    from .client import McpBusy

    limit = _limit()
    while len(_running) >= limit:
        idle = [k for k in _running if k.users == 0 and k.started]
        if not idle:
            raise McpBusy(limit)
        await drop(min(idle, key=lambda k: k.used_at))


async def _start(key: str, endpoint: Endpoint) -> Kept:
    from .client import McpFailure, bounded

    kept = Kept(
        key=key,
        name=endpoint.name,
        server_id=endpoint.server_id,
        version=endpoint.version,
        ready=asyncio.get_running_loop().create_future(),
        users=1,
    )
    _pool[key] = kept
    _running.add(kept)
    kept.task = asyncio.create_task(_run(kept, endpoint), name=f"mcp-stdio-{endpoint.name}")
    _watch_idle()
    try:
        await bounded(asyncio.shield(kept.ready), endpoint.timeout)
    except McpFailure:
        await drop(kept)
        raise
    return kept


async def _run(kept: Kept, endpoint: Endpoint) -> None:
    """The task that holds the session open: the SDK's transport is entered and left in one
    task (anyio's cancel scopes require it). Ends when the process is closed or lost."""
    from .client import connected

    try:
        async with connected(endpoint, endpoint.timeout, listen=True) as client:
            kept.ready.set_result(client)
            await kept.done.wait()
    except BaseException as exc:
        if not kept.ready.done():
            failed = exc if isinstance(exc, Exception) else ConnectionError("closed at its start")
            kept.ready.set_exception(failed)


async def release(kept: Kept) -> None:
    """A taker is done with it: it stays running (closed when retired and unused)."""
    kept.users = max(0, kept.users - 1)
    kept.used_at = time.monotonic()
    if kept.users == 0 and kept.retired:
        await _close(kept)
    elif _wake is not None:
        _wake.set()


async def drop(kept: Kept) -> None:
    """Closed now (it died, hangs, or is not to be trusted): the next taker starts a new one."""
    await _close(kept)


async def _close(kept: Kept) -> None:
    if kept.closed:
        return
    kept.closed = True
    _running.discard(kept)
    if _pool.get(kept.key) is kept:
        del _pool[kept.key]
    kept.done.set()
    task = kept.task
    if task is None or task.done():
        return
    if not kept.ready.done():
        task.cancel()  # still starting; the SDK's shutdown is shielded: the process is stopped
    _, pending = await asyncio.wait({task}, timeout=CLOSE_SECONDS)
    for late in pending:
        late.cancel()


def _watch_idle() -> None:
    global _idle_task, _wake
    if _wake is None:
        _wake = asyncio.Event()
    if _idle_task is None or _idle_task.done():
        _idle_task = asyncio.create_task(_close_idle(_wake), name=IDLE_TASK)
    _wake.set()


async def _close_idle(wake: asyncio.Event) -> None:
    """Each process unused for AGENT_MCP_STDIO_IDLE_SECONDS closed; ends when none is left
    (`_start` starts it again)."""
    while _running:
        wake.clear()
        seconds = _idle_seconds()
        for kept in list(_running):
            # Checked again for each: closing the one before may have let a taker in.
            unused = kept.users == 0 and kept.started and not kept.closed
            if unused and time.monotonic() - kept.used_at >= seconds:
                await drop(kept)
        now = time.monotonic()
        waits = [k.used_at + seconds - now for k in _running if k.users == 0 and k.started]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), max(min(waits, default=seconds), 0.01))


async def list_kept(endpoint: Endpoint) -> list[Tool]:
    """The tools the server's kept process lists (started now if none). A listing for no user
    (the scheduled refresh, "Test connection") keeps no process: no turn would use it."""
    from .client import McpFailure, bounded, list_pages

    kept = await take(endpoint)
    try:
        return await bounded(list_pages(kept.client), endpoint.timeout)
    except McpFailure as failure:
        if failure.down:
            await drop(kept)
        raise
    finally:
        if not endpoint.user_id:
            kept.retired = True  # closed once released, unless a turn holds it meanwhile
            if _pool.get(kept.key) is kept:
                del _pool[kept.key]
        await release(kept)


async def _retire(versions: dict[int, str]) -> None:
    for kept in list(_running):
        if versions.get(kept.server_id) == kept.version:
            continue
        kept.retired = True
        if _pool.get(kept.key) is kept:
            del _pool[kept.key]
        if kept.users == 0:
            await _close(kept)


async def _close_all() -> None:
    await asyncio.gather(*(_close(k) for k in list(_running)))


# --- from a thread -----------------------------------------------------------------------------


def running() -> int:
    """How many stdio server processes this process runs now."""
    return len(_running)


def sync_versions() -> None:
    """The kept processes of a server whose row changed, was disabled or deleted: closed (at
    once when unused, else when released). One query, only while this process keeps one; on a
    thread that may use the database."""
    if not _running:
        return
    rows = McpServer.objects.enabled().values_list("pk", "updated_at")
    bridge.call(_retire, {pk: str(at) for pk, at in rows})


def close_all() -> None:
    """Every kept process closed (the tests, after each)."""
    if _running or _pool:
        bridge.call(_close_all)
