"""`manage.py reseal`: encrypt every secret kept at rest again under the first of
ROLLBACK_ENCRYPTION_KEYS (the MCP servers' headers and stdio environments, the users' own MCP
credentials), the step of a key rotation between adding the new key first and dropping the old
one (core.sealed)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from agents.models import McpCredential, McpServer
from core.sealed import reseal_column


class Command(BaseCommand):
    help = "Encrypt the secrets kept at rest again under the first ROLLBACK_ENCRYPTION_KEYS key."

    def handle(self, *args: Any, **options: Any) -> None:
        columns = ((McpServer, "headers"), (McpServer, "env"), (McpCredential, "headers"))
        for model, column in columns:
            done, unreadable = reseal_column(model, column)
            label = f"{model._meta.verbose_name_plural} ({column})"
            self.stdout.write(f"{label}: {done} resealed")
            if unreadable:
                self.stderr.write(
                    f"{label}: {unreadable} sealed with a key no longer configured, left as they"
                    " are: add that key back to ROLLBACK_ENCRYPTION_KEYS and run reseal again"
                )
