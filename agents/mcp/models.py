"""The operator's MCP servers (api-contract.md, "Workspace and tools with effects").

Kept in the admin; `AGENT_MCP_SERVERS` creates or updates them at the start (agents.mcp.config,
.services). Their tools reach the model as `<name>__<tool>`. The headers (an API key, a bearer
token) are secrets: written in the admin or the setting, sent to the server, never shown again,
logged, exported or given to the model. The app label is `agents` (agents.models re-exports the
class, so Django finds it there).
"""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from core.sealed import SealedJSONField

MCP_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$"


class McpServerQuerySet(models.QuerySet["McpServer"]):
    def enabled(self) -> McpServerQuerySet:
        return self.filter(enabled=True)


TRANSPORTS = (("http", "Streamable HTTP"), ("sse", "SSE"), ("stdio", "stdio (a command)"))


class McpServer(models.Model):
    """One MCP server whose tools the agent is offered: streamable HTTP or SSE at `url`, or a
    stdio `command` (with `args`, `env`) that a worker starts."""

    # The prefix of its tools' names: letters, digits, _ and -, so `<name>__<tool>` is a name
    # every model API accepts.
    name = models.CharField(
        max_length=40,
        unique=True,
        validators=[
            RegexValidator(
                MCP_NAME_PATTERN,
                "Letters, digits, _ and - only (at most 40), starting with a letter or digit.",
            )
        ],
    )
    transport = models.CharField(max_length=8, choices=TRANSPORTS, default="http")
    url = models.URLField(max_length=2000, blank=True)
    # stdio: the program, its arguments and its environment (beside PATH, HOME and the like).
    command = models.CharField(max_length=500, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = SealedJSONField(default=dict, blank=True)  # may hold secrets: sealed like headers
    # Seconds a listing or a call waits; None: AGENT_MCP_TIMEOUT.
    timeout = models.FloatField(null=True, blank=True)
    # Tool names (as the server names them): `allow` non-empty offers only those; `deny` never.
    allow = models.JSONField(default=list, blank=True)
    deny = models.JSONField(default=list, blank=True)
    # {"Header-Name": "value"}: secrets, encrypted at rest (core.sealed), never shown again.
    headers = SealedJSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    # Names of its tools (as the server names them) that wait for the owner's approval, beside
    # those the server annotates destructive.
    approval = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # The catalogue cache (agents.mcp.catalogue): the server's tools as it listed them (each a
    # tools/list entry: name, description, inputSchema, annotations), read by every turn.
    catalogue = models.JSONField(null=True, blank=True)
    catalogue_at = models.DateTimeField(null=True, blank=True)
    # Status: the last time it answered, the last failure (a safe reason), and the circuit
    # breaker: no turn contacts it before `down_until`.
    last_contact = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    failures = models.PositiveIntegerField(default=0)
    down_until = models.DateTimeField(null=True, blank=True)

    # --- Who gets it, and what each user brings (agents.mcp.access) ---------------------------
    # Everyone, or only the chosen users and the members of the chosen groups.
    for_everyone = models.BooleanField(default=True)
    users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+")
    groups = models.ManyToManyField(Group, blank=True, related_name="+")
    # Off in every session until its user turns it on in the chat's tools menu (a session's
    # `metadata.settings.mcp_servers`); else on until turned off there.
    per_session = models.BooleanField(default=False)
    # Header names each user supplies for themselves (McpCredential), e.g. ["Authorization"]
    # for a personal bearer token; a user who has not is not offered the server.
    user_headers = models.JSONField(default=list, blank=True)

    objects = McpServerQuerySet.as_manager()
    # Not a column: the user's own header values, when agents.mcp.access.servers_for read them.
    user_values: dict[str, str] | None = None

    class Meta:
        verbose_name = "MCP server"
        ordering: ClassVar[list[str]] = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def asked_headers(self) -> list[str]:
        """The header names each user must supply (none: the operator's headers serve all)."""
        names = self.user_headers if isinstance(self.user_headers, list) else []
        return [str(n) for n in names]


class McpCredential(models.Model):
    """One user's own header values for one server (those it asks for: `user_headers`),
    encrypted at rest, never shown again; deleted with the user or the server."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_credentials"
    )
    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="credentials")
    headers = SealedJSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "MCP credential"
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["user", "server"], name="one_mcp_credential_per_user")
        ]

    def __str__(self) -> str:
        return f"credentials of user {self.user_id} for {self.server_id}"
