"""The locks every writer of a session's rows takes, in this order: the session's, then the
branch's."""

from __future__ import annotations

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


def lock_branch(branch_id: int) -> Branch:
    try:
        return Branch.objects.select_for_update().get(pk=branch_id)
    except Branch.DoesNotExist:
        raise BranchNotFound() from None
