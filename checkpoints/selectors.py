"""Reads of checkpoints, always starting from the user."""

from __future__ import annotations

from django.db.models import QuerySet

from sessions_app.errors import CheckpointNotFound
from sessions_app.models import ExternalSession, InternalSession
from sessions_app.selectors import _pk

from .models import Checkpoint


def get_checkpoint_for_user(user, pk) -> Checkpoint:
    key = _pk(pk)
    if key is None:
        raise CheckpointNotFound()
    try:
        return (
            Checkpoint.objects.for_user(user)
            .select_related("branch", "branch__session")
            .get(pk=key)
        )
    except Checkpoint.DoesNotExist:
        raise CheckpointNotFound() from None


def session_checkpoints(
    session: ExternalSession, *, branch: InternalSession | None = None
) -> QuerySet[Checkpoint]:
    """Checkpoints of every branch of the session (or of one branch), newest first."""
    qs = Checkpoint.objects.filter(branch__session=session)
    if branch is not None:
        qs = qs.filter(branch=branch)
    return qs.order_by("-created_at", "-id")
