"""A session: a user's conversation or project, which owns its branches."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.validation import NAME_MAX_LENGTH, JSONObject, time_in_range

if TYPE_CHECKING:
    from typing import TypeAlias

    from django.contrib.auth.base_user import AbstractBaseUser
    from django.contrib.auth.models import AnonymousUser

    # Whoever a request is from: a signed-in user or the anonymous one.
    AnyUser: TypeAlias = AbstractBaseUser | AnonymousUser

# The name of a session nobody has named yet: the model titles it after its first exchange
# (sessions_app.services.session_title_set), its owner may rename it.
DEFAULT_SESSION_NAME = "New session"


class SessionQuerySet(models.QuerySet["Session"]):
    def for_user(self, user: AnyUser) -> SessionQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(owner=user.pk)

    def active(self) -> SessionQuerySet:
        return self.filter(archived_at__isnull=True)


class Session(models.Model):
    """A user's conversation or project: what the product calls a session."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_sessions"
    )
    session_name = models.CharField(max_length=NAME_MAX_LENGTH)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now)
    archived_at = models.DateTimeField(null=True, blank=True)
    # An integration's own address for the conversation (sessions_app.keys); empty: none (the API
    # shows null). Empty rather than NULL, like Turn.idempotency_key: one "no value" for the
    # column, in Django's way for text. Unique per owner: two users with the same key each have
    # their own session.
    session_key = models.CharField(max_length=255, blank=True, default="")
    # When its owner pinned it to the top of their list; null: not pinned.
    pinned_at = models.DateTimeField(null=True, blank=True)

    objects = SessionQuerySet.as_manager()

    class Meta:
        # seed name: the table of the seeds' ExternalSession, kept (the rename changed no table).
        db_table = "sessions_app_externalsession"
        verbose_name = "session"
        ordering: ClassVar[list[str]] = ["-created_at", "-id"]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["owner", "-created_at"], name="session_owner_created"),
            # The sidebar: pinned first, then most recently active (sessions_app.selectors).
            models.Index(
                fields=["owner", "-pinned_at", "-updated_at"], name="session_owner_pinned"
            ),
        ]
        # Times a user can set (an import, the admin) stay where Python can read them back.
        constraints: ClassVar[list[models.BaseConstraint]] = [
            time_in_range("created_at", name="session_created_at_in_range"),
            time_in_range("updated_at", name="session_updated_at_in_range"),
            time_in_range("archived_at", name="session_archived_at_in_range", null=True),
            time_in_range("pinned_at", name="session_pinned_at_in_range", null=True),
            # Its index serves the lookup of a user's session by key (owner, session_key).
            models.UniqueConstraint(
                fields=["owner", "session_key"],
                condition=~Q(session_key=""),
                name="session_key_unique_per_owner",
                violation_error_message="This user already has a session with this key.",
            ),
        ]

    def __str__(self) -> str:
        return self.session_name

    @property
    def settings(self) -> JSONObject:
        value = self.metadata.get("settings") if isinstance(self.metadata, dict) else None
        return value if isinstance(value, dict) else {}
