"""A summary of a history prefix, shared by every branch whose history holds it."""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from django.utils import timezone

from core.validation import time_in_range

from .message import Message


class Summary(models.Model):
    """A summary, written by the model, of a lineage prefix: the history up to and including
    `last_message`. Every branch whose history holds that message shares the prefix (histories
    form a tree), so one summary serves them all; nothing is copied per branch. A rewind that
    deletes `last_message` deletes the summary with it."""

    last_message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="summaries")
    # The summary covers the positions 0 .. end_position - 1 (last_message.position + 1).
    end_position = models.PositiveIntegerField()
    content = models.TextField()
    model = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    # tokens (estimated), pieces (summarising requests made), source_messages
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name_plural = "summaries"
        ordering: ClassVar[list[str]] = ["-end_position", "-id"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["last_message"], name="one_summary_per_prefix"),
            time_in_range("created_at", name="summary_created_at_in_range"),
        ]

    def __str__(self) -> str:
        return f"summary of positions 0-{self.end_position - 1}"
