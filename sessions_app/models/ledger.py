"""The effects ledger: one row per call of a tool of effect `external` that a turn stored (issue
36, "No effect is ever forgotten"; api-contract.md, `GET /sessions/{id}/effects/`).

A tool message records what a call did, but it belongs to its branch's history: a rewind, a
restore's rewind or a deleted branch takes it away while the effect stays in the world. The
ledger keeps the call apart from the history. Its branch, turn and message are plain ids (the
`_ref` columns, as governance's records keep theirs), not foreign keys: they must outlive the
rows they name, on SQLite and PostgreSQL alike, whichever path deletes those rows (the ORM's
cascades, a batch delete). Only the session's deletion (CASCADE), and so the user's erasure,
deletes an entry."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.validation import time_in_range

from .session import Session

# The most characters of a call's result, and of its arguments as JSON text, that an entry
# keeps (the tool message keeps up to AGENT_MAX_REPLY_CHARS): enough to say what was done.
LEDGER_TEXT_LIMIT = 4000


class LedgerEntry(models.Model):
    """One external call that a turn made: who, when, where in which branch's history, the tool,
    its arguments and result, and whether it ran."""

    class Status(models.TextChoices):
        RAN = "ran"  # it ran and answered without an error
        FAILED = "failed"  # it did not run, or answered with an error
        MAY_HAVE_RUN = "may_have_run"  # no answer came (a timeout, a lost connection)

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="ledger")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # Null only for an entry imported without its branch (checkpoints.transfer_ledger: the
    # exporting session had deleted it).
    branch_ref = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The branch's id, kept."
    )
    turn_ref = models.PositiveBigIntegerField(null=True, blank=True, help_text="The turn's id.")
    message_ref = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The tool message's id, kept."
    )
    # The tool message's position in its branch's history, for lineage queries (which entries
    # lie past a checkpoint on a branch's lineage).
    position = models.PositiveIntegerField()
    tool_name = models.CharField(max_length=200)
    tool_args = models.JSONField(null=True, blank=True)
    tool_result = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "effects ledger entry"
        verbose_name_plural = "effects ledger entries"
        ordering: ClassVar[list[str]] = ["id"]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["session", "id"], name="ledger_session_id"),
        ]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.CheckConstraint(
                condition=Q(status__in=["ran", "failed", "may_have_run"]),
                name="ledger_status_valid",
            ),
            time_in_range("created_at", name="ledger_created_at_in_range"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"
