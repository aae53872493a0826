"""Who gets which MCP server, and with which credentials.

A server is for everyone (`for_everyone`), or for the users chosen on it and the members of the
groups chosen on it. Of those a user may use, a session offers its turns those that are on in it:
the session's choice in the chat's tools menu (`metadata.settings.mcp_servers`, `{name: bool}`),
else the server's default (off for a `per_session` server, on for the others). A choice never
grants a server the user may not use.

A server may ask each user for their own header values (`user_headers`, stored encrypted in
McpCredential); a turn of a user who has not given them all is not offered it, and says so in a
notice naming the server and where to add them. `headers_for` merges the operator's headers with
the user's (the user's win for the names the server asks of them).

One function decides a turn's servers (`servers_for`), one gives a server's headers for a user
(`headers_for`), one finds a server a user may use by name (`get_server_for_user`): the turn,
the API, the page and the tools menu all go through them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Q

from core import log_secrets
from core.errors import InvalidInput, NotFound
from sessions_app.models import Session
from sessions_app.services import lock_session, session_update

from .models import McpCredential, McpServer, McpServerQuerySet
from .scrub import secrets_of
from .seen import seen_of

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

    from accounts.models import User

CHOICES_KEY = "mcp_servers"  # in a session's metadata.settings
WHERE_TO_ADD = "add them on your profile page (MCP servers) or in the chat's Tools menu"


class McpServerNotFound(NotFound):
    def __init__(self) -> None:
        super().__init__("No such MCP server.")


@dataclass(frozen=True)
class TurnServers:
    """The servers a turn's agent gets, and a notice for each it may not use yet."""

    servers: list[McpServer] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def usable_servers(user: User | AnonymousUser | None) -> McpServerQuerySet:
    """The enabled servers `user` may use: those for everyone, and those chosen for them or for
    one of their groups."""
    servers = McpServer.objects.enabled()
    if user is None or not user.is_authenticated:
        return servers.none()
    chosen = Q(users=user) | Q(groups__in=user.groups.all())
    ids = McpServer.objects.filter(chosen).values("pk")
    return servers.filter(Q(for_everyone=True) | Q(pk__in=ids))


def get_server_for_user(user: User | AnonymousUser | None, name: object) -> McpServer:
    """The server of that name, if `user` may use it; else McpServerNotFound (a 404: a server
    they may not use is never revealed)."""
    if not isinstance(name, str) or not name:
        raise McpServerNotFound()
    server = usable_servers(user).filter(name=name).first()
    if server is None:
        raise McpServerNotFound()
    return server


def session_choices(session: Session) -> dict[str, bool]:
    """The session's own choices of servers (name: on), ignoring anything malformed."""
    value = session.settings.get(CHOICES_KEY)
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, bool)}


def is_on(server: McpServer, choices: dict[str, bool]) -> bool:
    """On in a session with these choices: its choice, else the server's default."""
    return choices.get(server.name, not server.per_session)


def credentials_of(user: User, servers: list[McpServer]) -> dict[int, dict[str, str]]:
    """The user's own header values for each of these servers that has some (one query)."""
    rows = McpCredential.objects.filter(user=user, server__in=[s.pk for s in servers])
    return {
        row.server_id: {str(k): str(v) for k, v in row.headers.items()}
        for row in rows
        if isinstance(row.headers, dict)
    }


def missing_headers(server: McpServer, given: dict[str, str]) -> list[str]:
    """The header names the server asks of each user that `given` lacks (or has empty)."""
    return [name for name in server.asked_headers if not given.get(name)]


def servers_for(user: User, session: Session) -> TurnServers:
    """The servers the agent of a turn of `user` in `session` gets: those the user may use, on in
    the session, whose asked-for credentials the user has given. Each server comes with the
    user's values (read by `headers_for` without another query)."""
    choices = session_choices(session)
    servers = [s for s in usable_servers(user) if is_on(s, choices)]
    if not servers:
        return TurnServers()
    asking = [s for s in servers if s.asked_headers]
    given = credentials_of(user, asking) if asking else {}
    offered: list[McpServer] = []
    notices: list[str] = []
    for server in servers:
        values = given.get(server.pk, {})
        missing = missing_headers(server, values)
        if missing:
            notices.append(
                f"The MCP server {server.name} needs your own credentials "
                f"({', '.join(missing)}): {WHERE_TO_ADD}. Its tools were left out of this turn."
            )
            continue
        server.user_values = values
        offered.append(server)
    return TurnServers(servers=offered, notices=notices)


def headers_for(server: McpServer, user: User | None) -> dict[str, str]:
    """The headers sent to `server` for `user`: the operator's, with the user's own values for
    the names the server asks of users in their place. Every value, and every secret of the
    server's URL (agents.mcp.scrub.secrets_of), is remembered by the log filter
    (core.log_secrets), so no log line shows it."""
    headers = server.headers if isinstance(server.headers, dict) else {}
    merged = {str(k): str(v) for k, v in headers.items()}
    if user is not None and server.asked_headers:
        values = server.user_values
        if values is None:
            values = credentials_of(user, [server]).get(server.pk, {})
        asked = set(server.asked_headers)
        merged.update({k: v for k, v in values.items() if k in asked})
    log_secrets.remember(secrets_of(server.url, merged))
    return merged


@transaction.atomic
def session_server_choose(*, session: Session, server: McpServer, on: bool) -> Session:
    """Turn one server on or off for a session (its tools menu), keeping the rest of its
    metadata, through `session_update` (announced as `session.changed`, like every setting).
    The caller found `server` through `get_server_for_user` for the session's owner."""
    if not isinstance(on, bool):
        raise InvalidInput("on: must be true or false.")
    locked = lock_session(session.pk)
    metadata = dict(locked.metadata) if isinstance(locked.metadata, dict) else {}
    chosen = dict(locked.settings)
    choices = session_choices(locked)
    choices[server.name] = on
    chosen[CHOICES_KEY] = choices
    metadata["settings"] = chosen
    updated = session_update(session=locked, metadata=metadata)
    session.metadata, session.updated_at = updated.metadata, updated.updated_at
    return updated


@dataclass(frozen=True)
class ServerView:
    """One server as its user sees it (the API, the Tools menu, the profile)."""

    name: str
    tools: list[str]
    status: str  # available, unavailable, unknown (agents.mcp.seen)
    needs_credentials: bool  # it asks for values this user has not given
    asks_for: list[str]  # the header names it asks each user for
    credentials_set: bool  # this user has given them
    per_session: bool  # off in a session until turned on there
    on: bool | None = None  # on in the session asked about (None: no session)


def server_views(user: User, session: Session | None = None) -> list[ServerView]:
    """The servers `user` may use, by name, as they see them (never a URL or a header)."""
    servers = list(usable_servers(user))
    given = credentials_of(user, [s for s in servers if s.asked_headers])
    choices = session_choices(session) if session is not None else {}
    views = []
    for server in servers:
        seen = seen_of(server)
        missing = missing_headers(server, given.get(server.pk, {}))
        views.append(
            ServerView(
                name=server.name,
                tools=seen.tools,
                status=seen.status,
                needs_credentials=bool(missing),
                asks_for=server.asked_headers,
                credentials_set=bool(server.asked_headers) and not missing,
                per_session=server.per_session,
                on=is_on(server, choices) if session is not None else None,
            )
        )
    return views
