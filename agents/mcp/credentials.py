"""A user's own credentials for an MCP server: the header values it asks each user for
(`McpServer.user_headers`), set from the profile page, the chat's Tools menu or
`PUT /api/v1/mcp/servers/{name}/credentials/`, removed by DELETE. Encrypted at rest
(core.sealed), never shown again, never in an export; deleted with the user (ops.erasure) or
the server.

A value is checked before anything is written: a header the server does not ask for, a value
that is not one line of text, or one longer than MAX_VALUE_CHARS is refused (InvalidInput naming
the header, never quoting the value: it is a secret), and what was stored stays as it was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from core.errors import InvalidInput

from .models import McpCredential, McpServer

if TYPE_CHECKING:
    from accounts.models import User

MAX_VALUE_CHARS = 4096


def check_credentials(server: McpServer, headers: object) -> dict[str, str]:
    """The user's header values for `server`, every one it asks for, each one line of text."""
    asked = server.asked_headers
    if not asked:
        raise InvalidInput(f"headers: the MCP server {server.name} asks for no credentials.")
    if not isinstance(headers, dict):
        raise InvalidInput("headers: must be an object of header names to text values.")
    for name, value in headers.items():
        if name not in asked:
            raise InvalidInput(
                f"headers.{str(name)[:100]}: not a header {server.name} asks for "
                f"(it asks for {', '.join(asked)})."
            )
        if not isinstance(value, str):
            raise InvalidInput(f"headers.{name}: must be text.")
        if not value.strip():
            raise InvalidInput(f"headers.{name}: must not be empty.")
        if len(value) > MAX_VALUE_CHARS:
            raise InvalidInput(f"headers.{name}: at most {MAX_VALUE_CHARS:,} characters.")
        if any(c in value for c in "\r\n\0"):
            raise InvalidInput(f"headers.{name}: must be one line.")
    missing = [name for name in asked if name not in headers]
    if missing:
        raise InvalidInput(f"headers.{missing[0]}: required ({server.name} asks for it).")
    return {str(k): str(v).strip() for k, v in headers.items()}


@transaction.atomic
def mcp_credentials_set(*, user: User, server: McpServer, headers: object) -> McpCredential:
    """Store (or replace) the user's own values for `server`; checked first, nothing changes
    on a refusal. The caller found `server` through agents.mcp.access.get_server_for_user."""
    values = check_credentials(server, headers)
    row, _ = McpCredential.objects.select_for_update().get_or_create(user=user, server=server)
    row.headers = values
    row.updated_at = timezone.now()
    row.save(update_fields=["headers", "updated_at"])
    return row


def mcp_credentials_delete(*, user: User, server: McpServer) -> bool:
    """Remove the user's own values for `server`; whether there were any."""
    deleted, _ = McpCredential.objects.filter(user=user, server=server).delete()
    return deleted > 0


def has_credentials(user: User, server: McpServer) -> bool:
    """Whether the user has given every value `server` asks of them."""
    if not server.asked_headers:
        return True
    row = McpCredential.objects.filter(user=user, server=server).first()
    given = row.headers if row is not None and isinstance(row.headers, dict) else {}
    return all(given.get(name) for name in server.asked_headers)
