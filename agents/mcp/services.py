"""Writing AGENT_MCP_SERVERS into the `McpServer` rows: once per process, on first use (the
database is not ready when the app loads), and when the web server starts."""

from __future__ import annotations

import logging
import threading

from django.db import DatabaseError, transaction
from django.utils import timezone

from .config import McpServerEntry, configured_servers
from .models import McpServer

log = logging.getLogger(__name__)

_lock = threading.Lock()
_synced = False


def mcp_servers_sync(*, entries: list[McpServerEntry]) -> list[McpServer]:
    """Create or update one row per entry, by name. A key the entry leaves out keeps the row's
    value (headers set in the admin are not wiped by an entry without headers)."""
    now = timezone.now()
    rows: list[McpServer] = []
    with transaction.atomic():
        for entry in entries:
            row = McpServer.objects.select_for_update().filter(name=entry.name).first()
            if row is None:
                row = McpServer(name=entry.name, created_at=now)
            row.url = entry.url
            if entry.headers is not None:
                row.headers = entry.headers
            if entry.approval is not None:
                row.approval = entry.approval
            if entry.enabled is not None:
                row.enabled = entry.enabled
            row.updated_at = now
            row.save()
            rows.append(row)
    return rows


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
