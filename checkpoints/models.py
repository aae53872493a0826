"""Checkpoints: a named position in a branch, with a snapshot of the (small) session state."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from django.db import models
from django.utils import timezone

from core.validation import NAME_MAX_LENGTH, time_in_range

if TYPE_CHECKING:
    from sessions_app.models import AnyUser


class CheckpointQuerySet(models.QuerySet["Checkpoint"]):
    def for_user(self, user: AnyUser) -> CheckpointQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(branch__session__owner=user.pk)

    def auto(self) -> CheckpointQuerySet:
        return self.filter(is_auto=True)

    def manual(self) -> CheckpointQuerySet:
        return self.filter(is_auto=False)


class Checkpoint(models.Model):
    """A named position in a branch, with a snapshot of the (small) session state.

    It copies no message: `message_count` is the length of the branch's history when it was
    taken, and the history itself is read from the branch. The rows below it refer to it by name
    (`Branch.forked_from`, `Turn.checkpoint`: "checkpoints.Checkpoint").
    """

    branch = models.ForeignKey(
        "sessions_app.Branch", on_delete=models.CASCADE, related_name="checkpoints"
    )
    checkpoint_name = models.CharField(max_length=NAME_MAX_LENGTH)
    description = models.TextField(blank=True, default="")
    is_auto = models.BooleanField(default=False)
    message_count = models.PositiveIntegerField()
    session_state = models.JSONField(default=dict, blank=True)
    # The workspace as it stood: the file versions of the branch's lineage whose id is at most
    # this mark (workspace.selectors). One number: a checkpoint copies no file.
    files_mark = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    # trigger, tool_name, importance, ...
    metadata = models.JSONField(default=dict, blank=True)

    objects = CheckpointQuerySet.as_manager()

    class Meta:
        ordering: ClassVar[list[str]] = ["-created_at", "-id"]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["branch", "-created_at"], name="checkpoint_branch_created"),
            models.Index(
                fields=["branch", "is_auto", "-created_at"], name="checkpoint_branch_auto"
            ),
            models.Index(fields=["branch", "message_count"], name="checkpoint_branch_position"),
            # Which checkpoints hold a version (files_mark >= its id): a rewind's cut, coalescing.
            models.Index(fields=["branch", "files_mark"], name="checkpoint_branch_files_mark"),
            models.Index(fields=["created_at"], name="checkpoint_created"),
        ]
        # An imported checkpoint's time stays where Python can read it back.
        constraints: ClassVar[list[models.BaseConstraint]] = [
            time_in_range("created_at", name="checkpoint_created_at_in_range")
        ]

    def __str__(self) -> str:
        return self.checkpoint_name

    @property
    def kind(self) -> str:
        return "auto" if self.is_auto else "manual"
