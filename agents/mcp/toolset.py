"""The MCP tools a turn offers: listed at the start of the turn from every server its user gets
in its session (agents.mcp.access.servers_for, with agents.mcp.access.headers_for's headers),
each offered to the model as `<server>__<tool>` with its description and input schema, its
effect and approval read off its annotations and the server's `approval` list.

Bounded: a listing waits AGENT_MCP_TIMEOUT at most (all servers at once), a server offers at
most AGENT_MCP_MAX_TOOLS tools, a schema is at most AGENT_MCP_MAX_SCHEMA_CHARS of JSON, a
result at most AGENT_MCP_MAX_RESULT_CHARS characters. A server that is down leaves its tools out
of the turn with a notice (the turn's metadata["notices"]); the turn goes on. A call that fails
(the tool's error, a timeout, a dropped connection) raises with a "✗ ..." text: agno gives the
model that text as the result and marks the tool message as an error. Results are untrusted
text, shown through the same sanitised Markdown as every tool result; nothing in them can
approve anything.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agno.tools.function import Function
from django.conf import settings

from ..tool_errors import ToolFailed
from .access import headers_for, servers_for
from .seen import note_listing
from .services import mcp_servers_ensure

if TYPE_CHECKING:
    from mcp.types import Tool

    from sessions_app.models import Session

    from .client import Endpoint

log = logging.getLogger(__name__)

# What every model API accepts as a function name (OpenAI's rule: at most 64 of these).
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SEPARATOR = "__"
MAX_DESCRIPTION = 2000


class McpToolError(ToolFailed):
    """A call that failed: its text ("✗ ...", already safe to show: agents.mcp.scrub) is the
    tool's result, marked as an error."""


@dataclass
class McpToolset:
    """The MCP tools of one turn, and what the agent records of them."""

    functions: list[Function] = field(default_factory=list)
    effects: dict[str, str] = field(default_factory=dict)
    approvals: set[str] = field(default_factory=set)
    notices: list[str] = field(default_factory=list)

    @property
    def schema_chars(self) -> int:
        """How many characters these tools add to each request (names, descriptions, schemas):
        the window's fitting counts them like the instructions (agents.turn.fit)."""
        return sum(
            len(f.name) + len(f.description or "") + len(json.dumps(f.parameters or {}))
            for f in self.functions
        )


def _setting(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def effect_of(tool: Tool) -> str:
    """`none` when the server annotates it read-only, else `external`."""
    hints = tool.annotations
    return "none" if hints is not None and hints.read_only_hint is True else "external"


def needs_approval(tool: Tool, endpoint: Endpoint) -> bool:
    """Annotated destructive (and not read-only), or named in the server's `approval`."""
    hints = tool.annotations
    destructive = (
        hints is not None and hints.destructive_hint is True and hints.read_only_hint is not True
    )
    return destructive or tool.name in endpoint.approval


def _schema(tool: Tool) -> dict[str, Any] | None:
    """The input schema as the model gets it, or None when it is too big or not an object."""
    schema = dict(tool.input_schema or {})
    schema.setdefault("type", "object")
    if schema.get("type") != "object":
        return None
    schema.setdefault("properties", {})
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError):
        return None
    return schema if size <= _setting("AGENT_MCP_MAX_SCHEMA_CHARS", 16_000) else None


def _caller(endpoint: Endpoint, tool: str, full: str) -> Any:
    from .client import McpFailure, call_tool
    from .results import tool_result_of

    scrub = endpoint.scrub

    def call(**arguments: Any) -> Any:
        # What the server says is scrubbed of its own credentials (agents.mcp.scrub) before
        # the turn stores it, streams it or gives it to the model.
        try:
            result = call_tool(endpoint, tool, arguments)
        except McpFailure as failure:
            reason = scrub(failure.reason)
            log.warning("MCP tool %s failed: %s", full, reason)
            raise McpToolError(f"✗ {full} failed: {reason}.") from None
        limit = _setting("AGENT_MCP_MAX_RESULT_CHARS", 20_000)
        content = tool_result_of(result, limit=limit, scrub=scrub)
        text = content.text
        if result.is_error:
            said = text or "the tool reported an error"
            log.warning("MCP tool %s failed: %s", full, said[:300])
            raise McpToolError(f"✗ {full} failed: {said}")
        return content.for_agno()  # the text, with its images when it has any

    call.__name__ = full
    return call


def _offered(endpoint: Endpoint, tools: list[Tool], taken: set[str], toolset: McpToolset) -> None:
    limit = _setting("AGENT_MCP_MAX_TOOLS", 100)
    scrub = endpoint.scrub
    skipped: list[str] = []
    offered = 0
    for tool in tools:
        full = f"{endpoint.name}{SEPARATOR}{tool.name}"
        schema = _schema(tool)
        if offered >= limit or not TOOL_NAME.match(full) or full in taken or schema is None:
            skipped.append(tool.name[:64])
            continue
        offered += 1
        taken.add(full)
        toolset.functions.append(
            Function(
                name=full,
                description=scrub(tool.description or tool.title or tool.name)[:MAX_DESCRIPTION],
                parameters=schema,
                entrypoint=_caller(endpoint, tool.name, full),
                skip_entrypoint_processing=True,
            )
        )
        toolset.effects[full] = effect_of(tool)
        if needs_approval(tool, endpoint):
            toolset.approvals.add(full)
    if skipped:
        log.warning(
            "MCP server %s: %d tools not offered (a name the model API refuses, taken, past "
            "AGENT_MCP_MAX_TOOLS, or a schema too big): %s",
            endpoint.name,
            len(skipped),
            ", ".join(skipped[:20]),
        )


def mcp_toolset(*, session: Session, taken: set[str] | None = None) -> McpToolset:
    """The tools of the servers this turn's user gets in this session (agents.mcp.access; no
    server: no connection at all), sent the user's own credentials where the server asks for
    them. `taken`: names already offered; an MCP tool never replaces another tool."""
    mcp_servers_ensure()
    user = session.owner
    chosen = servers_for(user, session)
    rows = chosen.servers
    toolset = McpToolset(notices=list(chosen.notices))
    if not rows:
        return toolset
    # The SDK takes a second or more to import: only a process that talks to a server pays it.
    from .client import Endpoint, McpFailure, list_tools

    endpoints = [Endpoint.of(row, headers_for(row, user)) for row in rows]
    names = set(taken or ())
    for endpoint, listed in zip(endpoints, list_tools(endpoints), strict=True):
        if isinstance(listed, McpFailure):
            reason = endpoint.scrub(listed.reason)
            notice = (
                f"The MCP server {endpoint.name} is unavailable ({reason}); its tools "
                "were left out of this turn."
            )
            log.warning("%s", notice)
            toolset.notices.append(notice)
            note_listing(endpoint.name, reason=reason)
            continue
        note_listing(endpoint.name, tools=[t.name for t in listed])
        _offered(endpoint, listed, names, toolset)
    return toolset
