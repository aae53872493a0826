"""What an administrator did to a user's conversation, and why."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

from checkpoints.models import Checkpoint
from sessions_app.models import Session

# The permission that lets a staff user see users' conversations in the admin and restore them
# on their behalf (superusers have it as they have every permission).
GOVERN_PERMISSION = "governance.govern_conversations"
REASON_MAX_CHARS = 2000


class AuditRecord(models.Model):
    """One restore or rewind an administrator made for a user. The actor, the session and the
    checkpoint may go later (a deleted admin account, session or checkpoint): their names and
    ids are kept. The record goes with the user it is about (an erasure takes it)."""

    class Action(models.TextChoices):
        RESTORE_AS_BRANCH = "restore_as_branch", "restored as a new branch"
        REWIND = "rewind", "rewound"

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="governance_records"
    )
    session = models.ForeignKey(Session, null=True, on_delete=models.SET_NULL, related_name="+")
    session_ref = models.PositiveBigIntegerField(help_text="The session's id, kept.")
    checkpoint = models.ForeignKey(
        Checkpoint, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    checkpoint_ref = models.PositiveBigIntegerField(help_text="The checkpoint's id, kept.")
    checkpoint_name = models.CharField(max_length=200)
    action = models.CharField(max_length=32, choices=Action.choices)

    class Scope(models.TextChoices):
        ALL = "all", "the conversation and the files"
        CONVERSATION = "conversation", "the conversation only"
        FILES = "files", "the files only"

    # What the restore brought back (checkpoints.services.checkpoint_restore's `scope`).
    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.ALL)
    reason = models.TextField()
    # What it did: the branch now current (the new one, or the one rewound), and for a rewind
    # what it deleted.
    branch_ref = models.PositiveBigIntegerField()
    deleted_checkpoints = models.PositiveIntegerField(default=0)
    deleted_messages = models.PositiveIntegerField(default=0)
    deleted_branches = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    # When the user dismissed the notice on their chat page (every tab at once).
    acknowledged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "restore on a user's behalf"
        verbose_name_plural = "restores on users' behalf"
        ordering = ("-created_at", "-id")
        permissions = (
            (
                "govern_conversations",
                "Can view users' conversations and restore them on their behalf",
            ),
        )
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["session", "acknowledged_at"], name="governance_notice_idx"),
        ]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.CheckConstraint(
                condition=models.Q(action__in=["restore_as_branch", "rewind"]),
                name="governance_action_known",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.actor_name} {self.get_action_display()} {self.checkpoint_name!r}"
