"""Talking to one MCP server through the official SDK (`mcp.Client` over streamable HTTP, SSE,
or stdio: the SDK's `stdio_client` starts the server's command as a child of the worker).

`connected` opens one session, with the server's headers on its own httpx client; a listing or
a call is bounded (`bounded`) by the server's `timeout` (else AGENT_MCP_TIMEOUT). Who opens the
sessions: agents.mcp.listing (listings), agents.mcp.sessions (a turn's calls) and
agents.mcp.kept (the stdio server processes a process keeps). The agent's tools run
synchronously in the worker's threads, so every call goes through the one bridge
(`core.bridge`), on the process's bridge loop (never the web server's). What fails is
classified into a short reason that names neither the URL nor a header: both may carry secrets.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import anyio
import httpx2
from django.conf import settings
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import Tool, ToolListChangedNotification
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .catalogue import note_changed
from .models import McpServer
from .scrub import Scrubber, secrets_of

T = TypeVar("T")
# Pages of a tools/list walk: a server that pages forever cannot hold a turn.
MAX_PAGES = 10
# A lost `subscriptions/listen` stream is opened again at most this often, this long after.
RELISTENS = 5
RELISTEN_SECONDS = 1.0


@dataclass(frozen=True)
class Endpoint:
    """What a turn needs of one server row; the headers stay out of every repr."""

    name: str
    url: str = field(repr=False)
    headers: dict[str, str] = field(repr=False, default_factory=dict)
    approval: frozenset[str] = frozenset()
    server_id: int = 0
    transport: str = "http"
    command: str = field(repr=False, default="")
    args: tuple[str, ...] = field(repr=False, default=())
    env: dict[str, str] = field(repr=False, default_factory=dict)
    seconds: float | None = None
    allow: frozenset[str] = frozenset()
    deny: frozenset[str] = frozenset()
    # The row's config version (its `updated_at`): a kept stdio process of another version is
    # never reused (agents.mcp.kept).
    version: str = ""
    # The user whose turns call it (0: none, a listing or a check): a kept stdio process serves
    # one user, so what a server keeps in its session (a login, a browser, a toggle) is never
    # another user's (agents.mcp.kept).
    user_id: int = 0

    @classmethod
    def of(
        cls, row: McpServer, headers: dict[str, str] | None = None, user_id: int = 0
    ) -> Endpoint:
        """`headers`: what to send (agents.mcp.access.headers_for: the operator's merged with
        the user's own); None, the operator's alone. `user_id`: whose turn calls it."""
        # Either spelling names a tool: the server's (`convert_time`), or the one the model and
        # the page show (`time__convert_time`), which once silently matched nothing.
        shown = f"{row.name}__"

        def names(value: object) -> frozenset[str]:
            items = value if isinstance(value, list) else []
            return frozenset(str(a).removeprefix(shown) for a in items)

        env = {str(k): str(v) for k, v in (row.env if isinstance(row.env, dict) else {}).items()}
        if row.transport == "stdio" and headers:
            # A stdio server takes what each user supplies (`user_headers` names its variables)
            # in its environment, as the operator's own values.
            env.update({k: v for k, v in headers.items() if k in row.asked_headers})
        return cls(
            name=row.name,
            url=row.url,
            headers=endpoint_headers(row) if headers is None else headers,
            approval=names(row.approval),
            server_id=row.pk or 0,
            transport=row.transport,
            command=row.command,
            args=tuple(str(a) for a in row.args or []),
            env=env,
            seconds=row.timeout,
            allow=names(row.allow),
            deny=names(row.deny),
            version=str(row.updated_at),
            user_id=user_id,
        )

    @property
    def timeout(self) -> float:
        return self.seconds if self.seconds is not None else timeout()

    @cached_property
    def scrub(self) -> Scrubber:
        """What takes this server's own credentials out of what it says (made once)."""
        return Scrubber(secrets_of(self.url, {**self.headers, **self.env}))


def endpoint_headers(row: McpServer) -> dict[str, str]:
    """The headers sent to the server (the one place: per-user credentials merge here)."""
    headers = row.headers if isinstance(row.headers, dict) else {}
    return {str(k): str(v) for k, v in headers.items()}


class McpFailure(Exception):
    """A listing or a call that did not work; `reason` is safe to show and to log."""

    def __init__(self, reason: str, *, down: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        # True when it says the server is unreachable, hung or broken (the breaker opens);
        # False for an error the server answered with (a tool's own error).
        self.down = down


class McpBusy(McpFailure):
    """This worker already runs as many stdio servers as it may, each in use: not the server's
    fault (no breaker opens)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"this worker already runs {limit} stdio servers (AGENT_MCP_MAX_STDIO)", down=False
        )


def timeout() -> float:
    return float(getattr(settings, "AGENT_MCP_TIMEOUT", 30))


def _on_message(endpoint: Endpoint) -> Any:
    async def handle(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            note_changed(endpoint.server_id)

    return handle


@asynccontextmanager
async def connected(
    endpoint: Endpoint, seconds: float, *, listen: bool = False
) -> AsyncIterator[Client]:
    """One session with the server. `listen`: it also hears the server's `tools/list_changed`
    for as long as it is open (`hear_changes`): a turn's own sessions and the kept stdio
    processes do, a listing does not (it lists the tools anyway)."""
    handler = _on_message(endpoint)
    if endpoint.transport == "stdio":
        params = StdioServerParameters(
            command=endpoint.command, args=list(endpoint.args), env=endpoint.env or None
        )
        async with (
            Client(
                params, read_timeout_seconds=seconds, cache=None, message_handler=handler
            ) as client,
            _hearing(client, endpoint, listen),
        ):
            yield client
        return
    if endpoint.transport == "sse":
        sse = sse_client(endpoint.url, headers=endpoint.headers or None, timeout=seconds)
        async with (
            Client(
                sse, read_timeout_seconds=seconds, cache=None, message_handler=handler
            ) as client,
            _hearing(client, endpoint, listen),
        ):
            yield client
        return
    # Every request is bounded by `bounded`; the read timeout is the SDK's for event streams,
    # so a listening stream that hears nothing for a while is not lost.
    read = max(seconds, MCP_DEFAULT_SSE_READ_TIMEOUT)
    async with create_mcp_http_client(
        headers=endpoint.headers or None, timeout=httpx2.Timeout(seconds, read=read)
    ) as http:
        transport = streamable_http_client(endpoint.url, http_client=http)
        async with (
            Client(
                transport, read_timeout_seconds=seconds, cache=None, message_handler=handler
            ) as client,
            _hearing(client, endpoint, listen),
        ):
            yield client


@asynccontextmanager
async def _hearing(client: Client, endpoint: Endpoint, listen: bool) -> AsyncIterator[None]:
    if not listen:
        yield
        return
    task = asyncio.create_task(
        hear_changes(client, endpoint.server_id), name=f"mcp-listen-{endpoint.name}"
    )
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


async def hear_changes(client: Client, server_id: int) -> None:
    """A handshake-era server says `tools/list_changed` on the session (`_on_message`); a
    2026-era one only on a `subscriptions/listen` stream, opened here when the server says it
    sends it. Each event notes the server (agents.mcp.catalogue.note_changed). A stream that is
    lost is opened again (at most RELISTENS times), and the server noted: what it said
    meanwhile was not heard."""
    try:
        tools = client.server_capabilities.tools
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or not (
            tools and tools.list_changed
        ):
            return
    except Exception:
        return
    for attempt in range(RELISTENS + 1):
        try:
            async with client.listen(tools_list_changed=True) as stream:
                if attempt:
                    note_changed(server_id)
                async for _event in stream:
                    note_changed(server_id)
            return  # the server closed it
        except SubscriptionLost:
            await asyncio.sleep(RELISTEN_SECONDS)
        except Exception:
            return


async def list_pages(client: Client) -> list[Tool]:
    """The tools a connected server lists (at most MAX_PAGES pages)."""
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


async def bounded(coro: Awaitable[T], seconds: float) -> T:
    """The coroutine's result, or McpFailure with a short reason (a timeout included)."""
    try:
        return await asyncio.wait_for(coro, seconds)
    except McpFailure:
        raise
    except Exception as exc:
        answered = any(
            isinstance(leaf, MCPError)
            and leaf.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT)
            and "timed out" not in leaf.message
            for leaf in _leaves(exc)
        )
        raise McpFailure(reason_of(exc, seconds), down=not answered) from None


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _reason_of_one(exc: BaseException, seconds: float) -> str | None:
    waited = f"it did not answer within {seconds:g} seconds"
    if isinstance(exc, TimeoutError | httpx2.TimeoutException):
        return waited
    if isinstance(exc, httpx2.ConnectError):
        return "it could not be reached"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"it answered HTTP {exc.response.status_code}"
    if isinstance(exc, httpx2.TransportError):
        return "the connection to it failed"
    if isinstance(exc, FileNotFoundError):
        return "its command was not found"
    if isinstance(exc, OSError | anyio.BrokenResourceError | anyio.EndOfStream):
        return "its process could not be started or ended"
    if isinstance(exc, MCPError):
        if exc.code == REQUEST_TIMEOUT or "timed out" in exc.message:
            return waited
        if exc.code == CONNECTION_CLOSED:
            return "the connection to it was lost"
        return f"it answered with an error: {' '.join(exc.message.split())[:200]}"
    return None


def reason_of(exc: BaseException, seconds: float) -> str:
    """A short reason for a failure, without the URL or the headers."""
    leaves = _leaves(exc)
    for leaf in leaves:
        reason = _reason_of_one(leaf, seconds)
        if reason is not None:
            return reason
    return f"it failed ({type(leaves[0]).__name__})"
