"""What a user may know of a server they may use: its tools' names and whether it answers, as
the catalogue cache and the server's status keep them (agents.mcp.catalogue: the last listing,
the refresh job's or a turn's, and the circuit breaker), for GET /api/v1/mcp/servers/ and the
chat's Tools menu. Reading it never contacts the server: a page or an API call never waits for
one. A server never listed and never failed is `unknown`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .catalogue import is_down

if TYPE_CHECKING:
    from .models import McpServer

MAX_NAMES = 1000

Status = Literal["available", "unavailable", "unknown"]


@dataclass(frozen=True)
class Seen:
    status: Status = "unknown"
    tools: list[str] = field(default_factory=list)
    reason: str = ""


def seen_of(server: McpServer) -> Seen:
    """The server as its row last saw it (its reason is already scrubbed of its secrets)."""
    entries = server.catalogue if isinstance(server.catalogue, list) else None
    names = [str(t.get("name"))[:128] for t in entries or [] if isinstance(t, dict)]
    if is_down(server):
        return Seen("unavailable", names[:MAX_NAMES], (server.last_error or "")[:300])
    if entries is not None:
        return Seen("available", names[:MAX_NAMES])
    if server.last_error:
        return Seen("unavailable", [], server.last_error[:300])
    return Seen()
