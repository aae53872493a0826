"""Checkpoints: a named position in a branch, with a snapshot of the (small) session state."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from django.conf import settings
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


class ImportJobQuerySet(models.QuerySet["ImportJob"]):
    def for_user(self, user: AnyUser) -> ImportJobQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(owner=user.pk)


class ImportJob(models.Model):
    """An import of another app's export of several conversations (checkpoints.foreign), run by
    a task: its progress, the sessions it made, and what it left out or could not import."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="import_jobs"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    source = models.CharField(max_length=32)  # chatgpt, openwebui, librechat
    filename = models.CharField(max_length=NAME_MAX_LENGTH, blank=True, default="")
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    # The ids of the sessions made, in the export's order.
    sessions = models.JSONField(default=list, blank=True)
    # What was left out, counted by kind (checkpoints.foreign.formats.skipped_lines).
    skipped = models.JSONField(default=dict, blank=True)
    # The conversations that could not be imported: [{"index", "title", "error"}].
    failures = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, default="")
    # The export itself, until the job has read it (emptied once it ends).
    document = models.BinaryField(default=b"", editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ImportJobQuerySet.as_manager()

    class Meta:
        ordering: ClassVar[list[str]] = ["-created_at", "-id"]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["owner", "-created_at"], name="importjob_owner_created"),
        ]

    def __str__(self) -> str:
        return f"import {self.pk} ({self.source}, {self.done}/{self.total})"

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)
