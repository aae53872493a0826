"""Listing servers' tools (tools/list), every server at once, each within its own timeout: an
HTTP or SSE server in a session of its own, a stdio server through the process this process
keeps for it (agents.mcp.kept: started now if there is none, and then used by the turns)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from core import bridge

from . import kept
from .catalogue import drain_changed
from .client import McpFailure, bounded, connected, list_pages

if TYPE_CHECKING:
    from mcp.types import Tool

    from .client import Endpoint


async def _list(endpoint: Endpoint) -> list[Tool]:
    if endpoint.transport == "stdio":
        return await kept.list_kept(endpoint)

    async def own_session() -> list[Tool]:
        async with connected(endpoint, endpoint.timeout) as client:
            return await list_pages(client)

    return await bounded(own_session(), endpoint.timeout)


def list_tools(endpoints: list[Endpoint]) -> list[list[Tool] | McpFailure]:
    """Every server's tools, listed at once (each within its own timeout): each its tools or
    the reason it gave none."""

    async def one(endpoint: Endpoint) -> list[Tool] | McpFailure:
        try:
            return await _list(endpoint)
        except McpFailure as failure:
            return failure

    async def every() -> list[list[Tool] | McpFailure]:
        return list(await asyncio.gather(*(one(e) for e in endpoints)))

    if not endpoints:
        return []
    try:
        return bridge.call(every)
    finally:
        drain_changed()
