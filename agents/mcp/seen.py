"""What a user may know of a server they may use: its tools' names and whether it answered, as
the last turn that listed it saw (GET /api/v1/mcp/servers/, the chat's Tools menu).

Kept in the cache (shared by every process when REDIS_URL is set) by `note_listing`, called by
the turn's listing (agents.mcp.toolset); a server no turn has listed yet is `unknown`. Reading
it never contacts the server: a page or an API call never waits for one. (The lead may point
`seen_of` at the catalogue the transport work keeps, with the same answer.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from django.core.cache import cache

KEY = "mcp:seen:{name}"
KEEP_SECONDS = 7 * 24 * 3600
MAX_NAMES = 1000

Status = Literal["available", "unavailable", "unknown"]


@dataclass(frozen=True)
class Seen:
    status: Status = "unknown"
    tools: list[str] = field(default_factory=list)
    reason: str = ""


def note_listing(name: str, *, tools: list[str] | None = None, reason: str = "") -> None:
    """A listing of server `name`: its tools (as the server names them), or why it gave none
    (a reason already scrubbed of the server's secrets)."""
    if tools is not None:
        value = {"status": "available", "tools": [t[:128] for t in tools[:MAX_NAMES]]}
    else:
        value = {"status": "unavailable", "tools": [], "reason": reason[:300]}
    cache.set(KEY.format(name=name), value, KEEP_SECONDS)


def seen_of(name: str) -> Seen:
    value = cache.get(KEY.format(name=name))
    if not isinstance(value, dict) or value.get("status") not in ("available", "unavailable"):
        return Seen()
    tools = value.get("tools")
    return Seen(
        status=value["status"],
        tools=[str(t) for t in tools] if isinstance(tools, list) else [],
        reason=str(value.get("reason") or ""),
    )
