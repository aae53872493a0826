"""Checkpoints: a named position in a branch, with a snapshot of the (small) session state.

A checkpoint copies no message: `message_count` is the length of the branch's history when it was
taken, and the history itself is read from the branch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models
from django.utils import timezone

from core.validation import NAME_MAX_LENGTH, time_in_range
from sessions_app.models import InternalSession

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

    from accounts.models import User


class CheckpointQuerySet(models.QuerySet["Checkpoint"]):
    def for_user(self, user: User | AnonymousUser) -> CheckpointQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(branch__session__owner=user.pk)

    def auto(self) -> CheckpointQuerySet:
        return self.filter(is_auto=True)

    def manual(self) -> CheckpointQuerySet:
        return self.filter(is_auto=False)


class Checkpoint(models.Model):
    branch = models.ForeignKey(
        InternalSession, on_delete=models.CASCADE, related_name="checkpoints"
    )
    checkpoint_name = models.CharField(max_length=NAME_MAX_LENGTH)
    description = models.TextField(blank=True, default="")
    is_auto = models.BooleanField(default=False)
    message_count = models.PositiveIntegerField()
    session_state = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # trigger, tool_name, importance, ...
    metadata = models.JSONField(default=dict, blank=True)

    objects = CheckpointQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["branch", "-created_at"], name="checkpoint_branch_created"),
            models.Index(
                fields=["branch", "is_auto", "-created_at"], name="checkpoint_branch_auto"
            ),
            models.Index(fields=["branch", "message_count"], name="checkpoint_branch_position"),
            models.Index(fields=["created_at"], name="checkpoint_created"),
        ]
        # An imported checkpoint's time stays where Python can read it back.
        constraints = [time_in_range("created_at", name="checkpoint_created_at_in_range")]

    def __str__(self) -> str:
        return self.checkpoint_name

    @property
    def kind(self) -> str:
        return "auto" if self.is_auto else "manual"
