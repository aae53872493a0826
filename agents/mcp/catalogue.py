"""The catalogue cache and the circuit breaker, kept on each server's `McpServer` row (the
database: shared by every process).

The catalogue is the server's tools as it listed them (tools/list entries, JSON), refreshed by
`agents.mcp.services.mcp_catalogue_refresh`: on a schedule (beat's `mcp-catalogue`; in the
embedded mode, a job of its recovery rounds), on an admin change ("Test connection", a save) and
when a server says `notifications/tools/list_changed` (the row is marked stale: the next turn
lists it again). A turn reads the rows and lists only a server that has no catalogue yet.

A server says its tools changed on the bridge loop (in a turn's session or a kept stdio
process's: agents.mcp.client.connected hears it on the session or on a `subscriptions/listen`
stream), which must not touch the
database: it only notes the server (`note_changed`); the row is written by `drain_changed`, on a
thread that may write: at the start of each turn with MCP servers, at a turn's end, after each
listing.

The breaker: a server that fails (a listing or a call that could not reach it, timed out or broke
the connection) is not contacted before `down_until`, AGENT_MCP_BACKOFF_SECONDS after its first
failure, doubling with each failure in a row up to 16 times that; one answer closes it.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from .models import McpServer

if TYPE_CHECKING:
    from mcp.types import Tool

log = logging.getLogger(__name__)

SEPARATOR = "__"
# What a catalogue keeps of a server that lists more: the first this many tools, in its order.
MAX_CATALOGUE = 1000


def tool_names(row: McpServer) -> list[str]:
    return [str(t.get("name", "")) for t in row.catalogue or [] if isinstance(t, dict)]


def unknown_tools(row: McpServer, names: list[str]) -> list[str]:
    """The names (either spelling) that are not among the server's tools; [] while its
    catalogue is not known."""
    if row.catalogue is None:
        return []
    known = set(tool_names(row))
    return [n for n in names if n.removeprefix(f"{row.name}{SEPARATOR}") not in known]


def backoff(failures: int) -> timedelta:
    base = float(getattr(settings, "AGENT_MCP_BACKOFF_SECONDS", 60.0))
    return timedelta(seconds=base * 2 ** min(max(failures - 1, 0), 4))


def is_down(row: McpServer) -> bool:
    return row.down_until is not None and row.down_until > timezone.now()


def catalogue_store(*, server_id: int, tools: list[Tool]) -> None:
    """A listing that answered: its tools (the first MAX_CATALOGUE) become the catalogue, the
    breaker closes; an approval name not among them is recorded as the last error."""
    now = timezone.now()
    entries: list[dict[str, Any]] = [
        t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools[:MAX_CATALOGUE]
    ]
    row = McpServer.objects.filter(pk=server_id).first()
    if row is None:
        return
    row.catalogue = entries
    unknown = unknown_tools(row, [str(a) for a in row.approval or []])
    fields: dict[str, Any] = {
        "catalogue": entries,
        "catalogue_at": now,
        "last_contact": now,
        "failures": 0,
        "down_until": None,
    }
    if len(tools) > MAX_CATALOGUE:
        log.warning("MCP server %s lists %d tools: the first %d kept", row.name, len(tools), 1000)
    if unknown:
        fields["last_error"] = (
            f"approval names {', '.join(unknown)[:200]} are not among its tools "
            f"({', '.join(tool_names(row))[:200]})"
        )
        fields["last_error_at"] = now
        log.warning("MCP server %s: %s", row.name, fields["last_error"])
    McpServer.objects.filter(pk=server_id).update(**fields)


def server_answered(*, server_id: int) -> None:
    McpServer.objects.filter(pk=server_id).update(
        last_contact=timezone.now(), failures=0, down_until=None
    )


def server_failed(*, server_id: int, reason: str) -> None:
    """A failure that says the server is unreachable or broken: the breaker opens."""
    now = timezone.now()
    McpServer.objects.filter(pk=server_id).update(
        failures=F("failures") + 1, last_error=reason[:500], last_error_at=now
    )
    row = McpServer.objects.filter(pk=server_id).only("failures").first()
    if row is not None:
        McpServer.objects.filter(pk=server_id).update(down_until=now + backoff(row.failures))


# Servers that said their tools changed (their ids), noted on the bridge loop, drained by the
# sync side (set.add and set.pop are atomic: no lock).
_changed: set[int] = set()


def note_changed(server_id: int) -> None:
    """On the bridge loop: the server said `notifications/tools/list_changed`."""
    _changed.add(server_id)


def drain_changed() -> None:
    """The noted servers' catalogues marked stale (on a thread that may write the database)."""
    while _changed:
        try:
            server_id = _changed.pop()
        except KeyError:  # another thread drained it meanwhile
            return
        catalogue_stale(server_id=server_id)


def catalogue_stale(*, server_id: int) -> None:
    """The server said its tools changed: the next turn (or refresh) lists them again."""
    McpServer.objects.filter(pk=server_id).update(catalogue=None, catalogue_at=None)
