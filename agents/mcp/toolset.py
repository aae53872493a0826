"""The MCP tools a turn offers: the servers its user gets in its session
(agents.mcp.access.servers_for, each sent agents.mcp.access.headers_for's headers), read from
each one's cached catalogue (a server with none yet is listed now, once; agents.mcp.catalogue), a
server whose breaker is open skipped with a notice and not contacted; each offered to the model
as `<server>__<tool>` with its description and input schema, its effect and approval read off
its annotations and the server's `approval` list, less its `deny` list (and only its `allow`
list when it has one).

Bounded: a listing waits the server's timeout at most (all servers at once), a server offers at
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
import threading
from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agno.tools.function import Function
from django.conf import settings

from ..tool_errors import ToolFailed
from . import kept
from .access import TurnServers, headers_for, servers_for
from .catalogue import drain_changed
from .services import mcp_servers_ensure

if TYPE_CHECKING:
    from mcp.types import Tool

    from sessions_app.models import Session

    from .client import Endpoint
    from .models import McpServer
    from .sessions import TurnSessions

log = logging.getLogger(__name__)

# What every model API accepts as a function name (OpenAI's rule: at most 64 of these).
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SEPARATOR = "__"
MAX_DESCRIPTION = 2000


class McpToolError(ToolFailed):
    """A call that failed: its text ("✗ ...", already safe to show: agents.mcp.scrub) is the
    tool's result, marked as an error. `may_have_run`: no answer came (a timeout, a lost
    connection, a server process that died), so the server may have done it."""

    def __init__(self, text: str, *, may_have_run: bool = False) -> None:
        super().__init__(text)
        self.may_have_run = may_have_run


@dataclass
class McpToolset:
    """The MCP tools of one turn, and what the agent records of them."""

    functions: list[Function] = field(default_factory=list)
    effects: dict[str, str] = field(default_factory=dict)
    approvals: set[str] = field(default_factory=set)
    notices: list[str] = field(default_factory=list)
    # Each tool's deadline (agents.tool_deadline): its server's timeout and half as much again
    # (2 s at least), so the transport's own timeout answers first, with its reason.
    timeouts: dict[str, float] = field(default_factory=dict)
    # The turn's MCP sessions (agents.mcp.sessions), opened on first use; None: no server.
    sessions: TurnSessions | None = None

    def close(self) -> None:
        """The end of the turn's attempt: its MCP sessions are closed."""
        if self.sessions is not None:
            if _turn_sessions.get() is self.sessions:
                _turn_sessions.set(None)
            self.sessions.close()

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


# The MCP sessions of the turn running in this context (set by `mcp_toolset`, on the turn's
# thread; a call runs on the tool executor in a copy of that context, agents.tool_deadline).
# The tools' callables are made once per process, server and user (`_offers`), not per turn:
# agno keeps what it works out of a callable (its signature, framework parameters, in caches
# it makes for it) on the callable, so callables made per turn cost every turn that work again.
_turn_sessions: ContextVar[TurnSessions | None] = ContextVar("mcp_turn_sessions", default=None)


def _caller(endpoint: Endpoint, tool: str, full: str) -> Any:
    from .client import McpFailure
    from .results import tool_result_of

    scrub = endpoint.scrub

    def call(**arguments: Any) -> Any:
        sessions = _turn_sessions.get()
        if sessions is None:  # never within a turn: its toolset sets them first
            raise McpToolError(f"✗ {full} failed: called outside a turn.")
        # What the server says is scrubbed of its own credentials (agents.mcp.scrub) before
        # the turn stores it, streams it or gives it to the model.
        try:
            result = sessions.call(endpoint, tool, arguments)
        except McpFailure as failure:
            reason = scrub(failure.reason)
            log.warning("MCP tool %s failed: %s", full, reason)
            if failure.down:
                # No answer came: the server may have done it (a lost connection, a timeout).
                sessions.note_failed(endpoint.server_id, reason)  # the breaker, at the turn's end
                raise McpToolError(
                    f"✗ {full} failed: {reason}; it may have run.", may_have_run=True
                ) from None
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


def _for_the_model(tool: Tool, endpoint: Endpoint) -> bool:
    """Not denied, allowed (when the server has an allow list), and not hidden from the model:
    MCP 2025-11's Apps extension marks a tool `_meta.ui.visibility` without "model" as one only
    an app calls; the SDK's Tool has no other "not callable" mark."""
    if tool.name in endpoint.deny or (endpoint.allow and tool.name not in endpoint.allow):
        return False
    ui = (tool.meta or {}).get("ui")
    visibility = ui.get("visibility") if isinstance(ui, dict) else None
    return not (isinstance(visibility, list) and "model" not in visibility)


@dataclass(frozen=True)
class _Offer:
    """One server's tools as a turn offers them, made once per process (see `_turn_sessions`)."""

    functions: tuple[Function, ...]
    effects: dict[str, str]
    timeouts: dict[str, float]
    approvals: frozenset[str]


# By the endpoint as configured (its user and credentials included), its catalogue, the bounds
# and the names already taken; the least recently used goes past _OFFERS_KEPT.
_offers: OrderedDict[tuple[Any, ...], _Offer] = OrderedDict()
_offers_lock = threading.Lock()
_OFFERS_KEPT = 256


def _endpoint_key(endpoint: Endpoint) -> tuple[Any, ...]:
    return (
        endpoint.server_id,
        endpoint.user_id,
        endpoint.version,
        endpoint.name,
        endpoint.url,
        tuple(sorted(endpoint.headers.items())),
        endpoint.approval,
        endpoint.transport,
        endpoint.command,
        endpoint.args,
        tuple(sorted(endpoint.env.items())),
        endpoint.seconds,
        endpoint.allow,
        endpoint.deny,
    )


def _offered(
    endpoint: Endpoint,
    tools: list[Tool],
    taken: set[str],
    toolset: McpToolset,
    catalogue: object,
) -> None:
    """The server's tools into the turn's toolset: made once per process for an endpoint and
    catalogue (`catalogue` None: listed just now, made again)."""
    limit = _setting("AGENT_MCP_MAX_TOOLS", 100)
    key = (
        _endpoint_key(endpoint),
        catalogue,
        limit,
        _setting("AGENT_MCP_MAX_SCHEMA_CHARS", 16_000),
        float(endpoint.timeout),
        frozenset(taken),
    )
    with _offers_lock:
        offer = _offers.get(key) if catalogue is not None else None
        if offer is not None:
            _offers.move_to_end(key)
    if offer is None:
        offer = _offer(endpoint, tools, taken, limit, fresh=catalogue is None)
        with _offers_lock:
            _offers[key] = offer
            while len(_offers) > _OFFERS_KEPT:
                _offers.popitem(last=False)
    taken.update(offer.effects)
    toolset.functions.extend(offer.functions)
    toolset.effects.update(offer.effects)
    toolset.timeouts.update(offer.timeouts)
    toolset.approvals |= offer.approvals


def _offer(
    endpoint: Endpoint, tools: list[Tool], taken: set[str], limit: int, fresh: bool
) -> _Offer:
    scrub = endpoint.scrub
    skipped: list[str] = []
    functions: list[Function] = []
    effects: dict[str, str] = {}
    timeouts: dict[str, float] = {}
    approvals: set[str] = set()
    for tool in tools:
        if not _for_the_model(tool, endpoint):
            continue
        full = f"{endpoint.name}{SEPARATOR}{tool.name}"
        schema = _schema(tool)
        taken_here = full in taken or full in effects
        if len(functions) >= limit or not TOOL_NAME.match(full) or taken_here or schema is None:
            skipped.append(tool.name[:64])
            continue
        functions.append(
            Function(
                name=full,
                description=scrub(tool.description or tool.title or tool.name)[:MAX_DESCRIPTION],
                parameters=schema,
                entrypoint=_caller(endpoint, tool.name, full),
                skip_entrypoint_processing=True,
            )
        )
        effects[full] = effect_of(tool)
        timeouts[full] = endpoint.timeout + max(2.0, endpoint.timeout / 2)
        if needs_approval(tool, endpoint):
            approvals.add(full)
    if skipped:
        # Once per catalogue (when listed), not at every turn that reads it from the cache.
        log.log(
            logging.WARNING if fresh else logging.DEBUG,
            "MCP server %s: %d tools not offered (a name the model API refuses, taken, past "
            "AGENT_MCP_MAX_TOOLS, or a schema too big): %s",
            endpoint.name,
            len(skipped),
            ", ".join(skipped[:20]),
        )
    return _Offer(tuple(functions), effects, timeouts, frozenset(approvals))


def _notice(
    toolset: McpToolset, endpoint: Endpoint, reason: str, level: int = logging.WARNING
) -> None:
    notice = (
        f"The MCP server {endpoint.name} is unavailable ({endpoint.scrub(reason)}); its tools "
        "were left out of this turn."
    )
    log.log(level, "%s", notice)
    toolset.notices.append(notice)


# The catalogues parsed into the SDK's Tool objects, per process, by (server id, listed at):
# a turn that reads an unchanged catalogue does not validate it again.
_parsed: dict[tuple[int, str], list[Tool]] = {}


def _tools_of(row: McpServer) -> list[Tool]:
    from mcp.types import Tool

    key = (row.pk, str(row.catalogue_at))
    tools = _parsed.get(key)
    if tools is None:
        if len(_parsed) > 256:
            _parsed.clear()
        tools = _parsed[key] = [Tool.model_validate(t) for t in row.catalogue or []]
    return tools


def _catalogues(
    rows: list[McpServer], toolset: McpToolset, user: Any
) -> list[tuple[Endpoint, list[Tool], object]]:
    """Each usable server's tools: from its cached catalogue, or listed now when it has none
    (and stored); a server whose breaker is open gets a notice and no contact."""
    from .catalogue import catalogue_store, is_down, server_failed
    from .client import Endpoint, McpBusy, McpFailure
    from .listing import list_tools

    ready: list[tuple[Endpoint, list[Tool], object]] = []
    unlisted: list[Endpoint] = []
    own: set[int] = set()  # the servers listed with this user's own credentials
    for row in rows:
        endpoint = Endpoint.of(row, headers_for(row, user), user_id=getattr(user, "pk", 0) or 0)
        if is_down(row):
            # Logged when it failed; each turn that skips it says so to its owner only.
            _notice(toolset, endpoint, row.last_error or "it failed recently", logging.DEBUG)
        elif row.catalogue is None:
            unlisted.append(endpoint)
            if row.asked_headers:
                own.add(endpoint.server_id)
        else:
            ready.append((endpoint, _tools_of(row), (row.pk, str(row.catalogue_at))))
    for endpoint, listed in zip(unlisted, list_tools(unlisted), strict=True):
        if isinstance(listed, McpFailure):
            _notice(toolset, endpoint, listed.reason)
            # One user's credentials never close it to all; nor does this worker's bound.
            if endpoint.server_id not in own and not isinstance(listed, McpBusy):
                server_failed(server_id=endpoint.server_id, reason=endpoint.scrub(listed.reason))
            continue
        catalogue_store(server_id=endpoint.server_id, tools=listed)
        ready.append((endpoint, listed, None))
    return ready


def mcp_toolset(
    *, session: Session, taken: set[str] | None = None, any_server: bool = True
) -> McpToolset:
    """The tools of the servers this turn's user gets in this session (agents.mcp.access), from
    the catalogue cache (no server, or every catalogue known: no connection at all), sent the
    user's own credentials where the server asks for them. `taken`: names already offered; an
    MCP tool never replaces another tool. `any_server` False: the caller knows that no server
    is enabled at all (the turn's claim looked), so none is read."""
    mcp_servers_ensure()
    drain_changed()  # servers that said their tools changed since: listed again below
    kept.sync_versions()  # this process's stdio servers whose row changed: closed
    user = session.owner
    chosen = servers_for(user, session) if any_server else TurnServers()
    rows = list(chosen.servers)
    toolset = McpToolset(notices=list(chosen.notices))
    _turn_sessions.set(None)  # the last turn's, on this thread, are not this one's
    if not rows:
        return toolset
    from .sessions import TurnSessions

    toolset.sessions = TurnSessions()
    _turn_sessions.set(toolset.sessions)
    names = set(taken or ())
    for endpoint, tools, catalogue in _catalogues(rows, toolset, user):
        _offered(endpoint, tools, names, toolset, catalogue)
    return toolset
