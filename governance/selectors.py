"""Reads of governance: the notices a user has not dismissed, and the checks of the actor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import QuerySet

from .models import GOVERN_PERMISSION, AuditRecord

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

    from accounts.models import User
    from sessions_app.models import Session

NOTICES_SHOWN = 5


def may_govern(user: User | AnonymousUser) -> bool:
    """Whether `user` may see users' conversations in the admin and restore them: active staff
    with the dedicated permission (a superuser has every permission)."""
    return bool(user.is_active and user.is_staff and user.has_perm(GOVERN_PERMISSION))


def admin_notices(session: Session) -> list[AuditRecord]:
    """What administrators did to the session that its owner has not dismissed, newest first
    (at most NOTICES_SHOWN): one query."""
    return list(
        AuditRecord.objects.filter(
            session=session, user_id=session.owner_id, acknowledged_at__isnull=True
        ).order_by("-created_at", "-id")[:NOTICES_SHOWN]
    )


def records_for_session(session: Session) -> QuerySet[AuditRecord]:
    return AuditRecord.objects.filter(session_ref=session.pk).order_by("-created_at", "-id")
