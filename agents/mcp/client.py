"""Talking to one MCP server through the official SDK (`mcp.Client` over streamable HTTP).

Each listing and each call opens its own connection, with the server's headers on its own
httpx client, and is bounded by AGENT_MCP_TIMEOUT. The agent's tools run synchronously in the
worker's thread (agno runs sync tools there), so every call here goes through the one bridge
(`core.bridge`), on the process's bridge loop (never the web server's). What fails is classified
into a short reason that names neither the URL nor a header: both may carry secrets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import httpx2
from django.conf import settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, Tool

from core import bridge

from .models import McpServer
from .scrub import Scrubber, secrets_of

T = TypeVar("T")
# Pages of a tools/list walk: a server that pages forever cannot hold a turn.
MAX_PAGES = 10


@dataclass(frozen=True)
class Endpoint:
    """What a turn needs of one server row; the headers stay out of every repr."""

    name: str
    url: str = field(repr=False)
    headers: dict[str, str] = field(repr=False, default_factory=dict)
    approval: frozenset[str] = frozenset()

    @classmethod
    def of(cls, row: McpServer, headers: dict[str, str] | None = None) -> Endpoint:
        """`headers`: what to send (agents.mcp.access.headers_for: the operator's merged with
        the user's own); None, the operator's alone."""
        if headers is None:
            headers = row.headers if isinstance(row.headers, dict) else {}
        approval = row.approval if isinstance(row.approval, list) else []
        # Either spelling names a tool: the server's (`convert_time`), or the one the model and
        # the page show (`time__convert_time`), which once silently matched nothing.
        shown = f"{row.name}__"
        return cls(
            name=row.name,
            url=row.url,
            headers={str(k): str(v) for k, v in headers.items()},
            approval=frozenset(str(a).removeprefix(shown) for a in approval),
        )

    @cached_property
    def scrub(self) -> Scrubber:
        """What takes this server's own credentials out of what it says (made once)."""
        return Scrubber(secrets_of(self.url, self.headers))


class McpFailure(Exception):
    """A listing or a call that did not work; `reason` is safe to show and to log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def timeout() -> float:
    return float(getattr(settings, "AGENT_MCP_TIMEOUT", 30))


@asynccontextmanager
async def connected(endpoint: Endpoint, seconds: float) -> AsyncIterator[Client]:
    async with create_mcp_http_client(
        headers=endpoint.headers or None, timeout=httpx2.Timeout(seconds)
    ) as http:
        transport = streamable_http_client(endpoint.url, http_client=http)
        async with Client(transport, read_timeout_seconds=seconds, cache=None) as client:
            yield client


async def _list(endpoint: Endpoint, seconds: float) -> list[Tool]:
    tools: list[Tool] = []
    async with connected(endpoint, seconds) as client:
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
    return tools


async def _call(endpoint: Endpoint, tool: str, arguments: dict[str, Any], seconds: float) -> Any:
    async with connected(endpoint, seconds) as client:
        return await client.call_tool(tool, arguments)


async def bounded(coro: Coroutine[Any, Any, T], seconds: float) -> T:
    """The coroutine's result, or McpFailure with a short reason (a timeout included)."""
    try:
        return await asyncio.wait_for(coro, seconds)
    except Exception as exc:
        raise McpFailure(reason_of(exc, seconds)) from None


def list_tools(endpoints: list[Endpoint]) -> list[list[Tool] | McpFailure]:
    """Every server's tools, listed at once: each its tools or the reason it gave none."""
    seconds = timeout()

    async def one(endpoint: Endpoint) -> list[Tool] | McpFailure:
        try:
            return await bounded(_list(endpoint, seconds), seconds)
        except McpFailure as failure:
            return failure

    async def every() -> list[list[Tool] | McpFailure]:
        return list(await asyncio.gather(*(one(e) for e in endpoints)))

    return bridge.call(every)


def call_tool(endpoint: Endpoint, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    """One call; McpFailure when the server could not be reached, timed out or refused it."""
    seconds = timeout()

    async def one() -> Any:
        return await bounded(_call(endpoint, tool, arguments, seconds), seconds)

    result = bridge.call(one)
    if not isinstance(result, CallToolResult):
        raise McpFailure(f"it answered with {type(result).__name__}, not a tool result")
    return result


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
    if isinstance(exc, MCPError):
        if "timed out" in exc.message:
            return waited
        return f"it answered with an error: {exc.message[:200]}"
    return None


def reason_of(exc: BaseException, seconds: float) -> str:
    """A short reason for a failure, without the URL or the headers."""
    leaves = _leaves(exc)
    for leaf in leaves:
        reason = _reason_of_one(leaf, seconds)
        if reason is not None:
            return reason
    return f"it failed ({type(leaves[0]).__name__})"
