"""The operator's MCP servers (api-contract.md, "Workspace and tools with effects").

Kept in the admin; `AGENT_MCP_SERVERS` creates or updates them at the start (agents.mcp.config,
.services). Their tools reach the model as `<name>__<tool>`. The headers (an API key, a bearer
token) are secrets: written in the admin or the setting, sent to the server, never shown again,
logged, exported or given to the model. The app label is `agents` (agents.models re-exports the
class, so Django finds it there).
"""

from __future__ import annotations

from typing import ClassVar

from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

MCP_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$"


class McpServerQuerySet(models.QuerySet["McpServer"]):
    def enabled(self) -> McpServerQuerySet:
        return self.filter(enabled=True)


class McpServer(models.Model):
    """One MCP server (streamable HTTP) whose tools the agent is offered."""

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
    url = models.URLField(max_length=2000)
    # {"Header-Name": "value"}: secrets, never shown again once saved.
    headers = models.JSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    # Names of its tools (as the server names them) that wait for the owner's approval, beside
    # those the server annotates destructive.
    approval = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = McpServerQuerySet.as_manager()

    class Meta:
        verbose_name = "MCP server"
        ordering: ClassVar[list[str]] = ["name"]

    def __str__(self) -> str:
        return self.name
