"""The locks every writer of a session's rows takes, in this order: the session's, then the
branch's."""

from __future__ import annotations

from django.utils import timezone

from sessions_app.errors import BranchNotFound, SessionNotFound

from ..models import Branch, Session


def lock_session(session_id: int) -> Session:
    """Serialise the writes to one session. Every write to a session's rows (append, checkpoint
    create and delete, fork, restore, rewind, activate, rename, storing a turn's answer and its
    state, deleting the session) takes this lock first, then the branch's row, so no
    interleaving can leave a checkpoint past the end of its branch, and no two writers take
    the same locks in opposite orders (a deadlock). A session gone meanwhile is SessionNotFound.
    (A turn's own status changes, one conditional update of its row each, need not.)"""
    try:
        return Session.objects.select_for_update().get(pk=session_id)
    except Session.DoesNotExist:
        raise SessionNotFound() from None


def lock_session_touched(session_id: int, *, owner_id: int | None = None) -> None:
    """`lock_session` for a writer that marks the session updated anyway (appending messages):
    the update of its `updated_at` takes the same lock, in one statement instead of a read and
    an update. A session gone meanwhile, or not `owner_id`'s when given, is SessionNotFound."""
    rows = Session.objects.filter(pk=session_id)
    if owner_id is not None:
        rows = rows.filter(owner_id=owner_id)
    if not rows.update(updated_at=timezone.now()):
        raise SessionNotFound()


def lock_branch(branch_id: int) -> Branch:
    try:
        return Branch.objects.select_for_update().get(pk=branch_id)
    except Branch.DoesNotExist:
        raise BranchNotFound() from None
