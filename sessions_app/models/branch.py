"""A branch: one line of conversation in a session; a restore or an edit forks a new one."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, ClassVar

from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.validation import NAME_MAX_LENGTH, time_in_range

from .session import Session

if TYPE_CHECKING:
    from .session import AnyUser


class BranchQuerySet(models.QuerySet["Branch"]):
    def for_user(self, user: AnyUser) -> BranchQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(session__owner=user.pk)


def new_agno_session_id() -> str:
    return str(uuid.uuid4())


class Branch(models.Model):
    """A branch: one line of conversation inside a session."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="branches")
    agno_session_id = models.CharField(max_length=64, unique=True, default=new_agno_session_id)
    # The name its owner gave it; empty: the page and the API call it by its default label
    # (sessions_app.labels).
    name = models.CharField(max_length=NAME_MAX_LENGTH, blank=True, default="")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    # How many of the parent's history messages this branch inherits.
    fork_position = models.PositiveIntegerField(default=0)
    forked_from = models.ForeignKey(
        "checkpoints.Checkpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="forks",
    )
    # Length of this branch's whole history (inherited plus own): the next message's position.
    message_count = models.PositiveIntegerField(default=0)
    session_state = models.JSONField(default=dict, blank=True)
    is_current = models.BooleanField(default=False)
    checkpoint_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    metadata = models.JSONField(default=dict, blank=True)
    # How much of its ancestors' workspace this branch sees (workspace.selectors): the file
    # versions of its parent's lineage whose id is at most this mark, as they stood at the fork.
    # Null for a branch with no parent.
    fork_file_mark = models.PositiveBigIntegerField(null=True, blank=True)

    objects = BranchQuerySet.as_manager()

    class Meta:
        # seed name: the table of the seeds' InternalSession, kept (the rename changed no table).
        db_table = "sessions_app_internalsession"
        verbose_name = "branch"
        verbose_name_plural = "branches"
        ordering: ClassVar[list[str]] = ["created_at", "id"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            # At most one current branch per session, enforced by the database; the services
            # create a session together with its first (current) branch and only ever move the
            # flag inside one transaction, so there is always exactly one.
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(is_current=True),
                name="one_current_branch_per_session",
            ),
            models.CheckConstraint(
                condition=Q(message_count__gte=models.F("fork_position")),
                name="branch_count_covers_fork",
            ),
            time_in_range("created_at", name="branch_created_at_in_range"),
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["session", "created_at"], name="branch_session_created")
        ]

    def __str__(self) -> str:
        return f"branch {self.pk} of session {self.session_id}"

    @property
    def own_message_count(self) -> int:
        return self.message_count - self.fork_position
