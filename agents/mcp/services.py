"""Writing AGENT_MCP_SERVERS into the `McpServer` rows: once per process, on first use (the
database is not ready when the app loads), and when the web server starts."""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, transaction
from django.utils import timezone

from .catalogue import unknown_tools
from .config import McpServerEntry, configured_servers
from .models import McpServer

log = logging.getLogger(__name__)

_lock = threading.Lock()
_synced = False
_refreshed_at: float | None = None


def mcp_servers_sync(*, entries: list[McpServerEntry]) -> list[McpServer]:
    """Create or update one row per entry, by name. A key the entry leaves out keeps the row's
    value (headers set in the admin are not wiped by an entry without headers). A row the entry
    does not change is not saved: its config version (`updated_at`) stays, so every process
    that starts does not close the stdio processes the others keep (agents.mcp.kept)."""
    now = timezone.now()
    rows: list[McpServer] = []
    with transaction.atomic():
        for entry in entries:
            row = McpServer.objects.select_for_update().filter(name=entry.name).first()
            before = None if row is None else _config(row)
            if row is None:
                row = McpServer(name=entry.name, created_at=now)
            row.url = entry.url
            row.transport = entry.transport
            row.command = entry.command
            for key in ("args", "env", "allow", "deny"):
                if getattr(entry, key) is not None:
                    setattr(row, key, getattr(entry, key))
            if "timeout" in entry.given:
                row.timeout = entry.timeout
            if entry.headers is not None:
                row.headers = entry.headers
            if entry.approval is not None:
                row.approval = approval_check(row, entry.approval, where="AGENT_MCP_SERVERS")
            if entry.enabled is not None:
                row.enabled = entry.enabled
            if before is None or _config(row) != before:
                row.updated_at = now
                row.save()
            rows.append(row)
    return rows


def _config(row: McpServer) -> tuple[object, ...]:
    """What AGENT_MCP_SERVERS sets of a row, to tell whether an entry changes it."""
    return (
        row.url,
        row.transport,
        row.command,
        row.args,
        row.env,
        row.allow,
        row.deny,
        row.timeout,
        row.headers,
        row.approval,
        row.enabled,
    )


def mcp_servers_ensure() -> None:
    """AGENT_MCP_SERVERS into the rows, once per process. A database that cannot take it yet
    (before `migrate`: no table) is logged and tried again on the next use, never a crash."""
    global _synced
    if _synced:
        return
    entries = configured_servers()
    if not entries:
        _synced = True
        return
    with _lock:
        if _synced:
            return
        try:
            rows = mcp_servers_sync(entries=entries)
        except DatabaseError as exc:
            log.warning("AGENT_MCP_SERVERS not written yet: %s", type(exc).__name__)
            return
        _synced = True
    log.info("AGENT_MCP_SERVERS: %s", ", ".join(r.name for r in rows))


def forget_sync() -> None:
    """For tests: write AGENT_MCP_SERVERS again on the next use."""
    global _synced
    _synced = False


def mcp_server_save(*, server: McpServer, headers: dict[str, str] | None = None) -> McpServer:
    """Save a server the operator edited (the admin); `headers` None keeps the stored ones."""
    if headers is not None:
        server.headers = headers
    server.updated_at = timezone.now()
    server.full_clean()
    server.save()
    return server


def approval_check(row: McpServer, names: list[str], *, where: str) -> list[str]:
    """The approval list, each name in either spelling (`tool` or `<server>__tool`), checked
    against the server's tools when its catalogue is known (ImproperlyConfigured naming the
    unknown ones and the server's list). Before the first listing nothing can be checked: the
    list is kept, and the first listing records any unknown name as the server's last error."""
    unknown = unknown_tools(row, names)
    if unknown:
        listed = ", ".join(t["name"] for t in row.catalogue or []) or "none"
        raise ImproperlyConfigured(
            f"{where} ({row.name}): approval names {', '.join(unknown)}, not among its tools "
            f"({listed[:1000]})."
        )
    return names


def mcp_catalogue_refresh(*, names: list[str] | None = None) -> dict[str, str]:
    """List the enabled servers (or those named, enabled or not) now, whatever their breaker
    says, and store what each answered: {name: "ok, N tools" or the reason it failed}. Run by a
    worker (beat, the admin's queued check) or the embedded runner, never by a web request: it
    may start a stdio server (kept by this process, agents.mcp.kept, for its turns)."""
    from . import kept
    from .catalogue import catalogue_store, server_failed
    from .client import Endpoint, McpBusy, McpFailure
    from .listing import list_tools

    rows = McpServer.objects.all() if names is not None else McpServer.objects.enabled()
    if names is not None:
        rows = rows.filter(name__in=names)
    outcome: dict[str, str] = {}
    endpoints = []
    for row in rows:
        if row.asked_headers:
            # The operator's headers alone would be refused: a turn of a user who gave their own
            # lists it (agents.mcp.toolset), and its failures open no breaker for the others.
            outcome[row.name] = "listed by the turns of users who gave their own credentials"
        else:
            endpoints.append(Endpoint.of(row))
    for endpoint, listed in zip(endpoints, list_tools(endpoints), strict=True):
        if isinstance(listed, McpFailure):
            reason = endpoint.scrub(listed.reason)
            if not isinstance(listed, McpBusy):  # this worker's bound is not the server's fault
                server_failed(server_id=endpoint.server_id, reason=reason)
            outcome[endpoint.name] = reason
        else:
            catalogue_store(server_id=endpoint.server_id, tools=listed)
            outcome[endpoint.name] = f"ok, {len(listed)} tools"
    kept.sync_versions()  # the stdio servers of changed or disabled rows (one listed now too)
    return outcome


def mcp_catalogues_when_due() -> None:
    """The embedded mode's schedule (a job of its recovery rounds): the catalogues listed again
    once AGENT_MCP_REFRESH_SECONDS have passed since this process last did it."""
    global _refreshed_at
    every = float(getattr(settings, "AGENT_MCP_REFRESH_SECONDS", 300.0))
    now = time.monotonic()
    if _refreshed_at is not None and now - _refreshed_at < every:
        return
    _refreshed_at = now
    mcp_servers_ensure()
    if McpServer.objects.enabled().exists():
        mcp_catalogue_refresh()
