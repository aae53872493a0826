"""Share links: one branch's history, as it stood when shared (or up to a checkpoint), for anyone
who has the link's address.

The address carries a token that the database never holds: only its SHA-256 (`token_hash`, the
lookup) and the random seed it is made from with the server's SECRET_KEY (`sharing.tokens`), so
a copy of the database alone opens no link, while the owner's profile can still show the address
to copy again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

from core.validation import time_in_range
from sessions_app.models import Branch, Session

if TYPE_CHECKING:
    from sessions_app.models import AnyUser


class ShareLinkQuerySet(models.QuerySet["ShareLink"]):
    def for_user(self, user: AnyUser) -> ShareLinkQuerySet:
        """The user's links, of sessions that are still theirs."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(owner=user.pk, session__owner=user.pk)


class ShareLink(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="share_links"
    )
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="share_links")
    # A branch deleted (a rewind that discards the part it was forked from, the session's
    # deletion) takes its links with it.
    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="share_links")
    # The checkpoint it was shared up to, if any; its point stays in message_count when the
    # checkpoint is deleted.
    checkpoint = models.ForeignKey(
        "checkpoints.Checkpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="share_links",
    )
    # The shared point: the page shows the history's positions below it ...
    message_count = models.PositiveIntegerField()
    # ... among the messages that existed when it was shared: message ids only grow, so "every
    # message so far" is the newest id. A rewind that later replaces positions below the point
    # writes messages with larger ids, which the page never shows.
    message_mark = models.PositiveBigIntegerField()
    token_hash = models.CharField(max_length=64, unique=True)
    token_seed = models.CharField(max_length=64)
    views = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    last_viewed_at = models.DateTimeField(null=True, blank=True)

    objects = ShareLinkQuerySet.as_manager()

    class Meta:
        verbose_name = "share link"
        ordering: ClassVar[list[str]] = ["-created_at", "-id"]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["owner", "-created_at"], name="share_owner_created"),
        ]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            time_in_range("created_at", name="share_created_at_in_range"),
            time_in_range("last_viewed_at", name="share_last_viewed_at_in_range", null=True),
        ]

    def __str__(self) -> str:
        return f"share link {self.pk} of branch {self.branch_id}"
