"""Writes to branches: fork (a new branch sharing a prefix of another's history), create, make
current, rename, store the agent's state."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core import events
from core.errors import InvalidInput
from core.validation import JSONObject, clean_metadata, clean_name, clean_session_state
from sessions_app.errors import BranchNotFound, RewindOutOfRange

from ..hooks import fork_mark
from ..models import Branch, Session
from .locks import lock_branch, lock_session


def branch_make_current(session_id: int, branch_id: int) -> None:
    """Move the session's current flag to `branch_id`. Call with the session row locked."""
    Branch.objects.filter(session_id=session_id, is_current=True).exclude(pk=branch_id).update(
        is_current=False
    )
    Branch.objects.filter(pk=branch_id).update(is_current=True)


@transaction.atomic
def branch_fork(
    *,
    branch: Branch,
    position: int,
    forked_from_id: int | None = None,
    session_state: JSONObject | None = None,
    make_current: bool = True,
    metadata: JSONObject | None = None,
    file_mark: int | None = None,
) -> Branch:
    """A new branch whose history is `branch`'s first `position` messages, and whose workspace
    is `branch`'s as of `file_mark` (a checkpoint's `files_mark`; by default, the files as they
    stood when the message at `position` was sent: workspace.selectors.fork_mark, through
    hooks.fork_mark). Copies no message and
    no file. The one way a branch is made: restoring a checkpoint (`forked_from_id`), editing or
    regenerating a message, and a rollback the agent asks for all come here."""
    lock_session(branch.session_id)
    parent = lock_branch(branch.pk)
    if isinstance(position, bool) or not isinstance(position, int):
        raise InvalidInput("The fork position must be a whole number.")
    if not 0 <= position <= parent.message_count:
        raise RewindOutOfRange(
            f"Cannot fork at message {position}: the branch has {parent.message_count} messages."
        )
    new = Branch.objects.create(
        session_id=parent.session_id,
        parent=parent,
        fork_position=position,
        message_count=position,
        forked_from_id=forked_from_id,
        fork_file_mark=fork_mark(parent, position) if file_mark is None else file_mark,
        session_state=parent.session_state if session_state is None else session_state,
        metadata=clean_metadata(metadata, what="branch metadata"),
        is_current=False,
    )
    if make_current:
        branch_make_current(parent.session_id, new.pk)
        new.is_current = True
        events.branch_changed(
            session=parent.session_id,
            branch=new.pk,
            checkpoint=forked_from_id,
        )
    return new


@transaction.atomic
def branch_create(*, session: Session) -> Branch:
    """A new, empty line of conversation in the session (no parent), made current."""
    lock_session(session.pk)
    branch = Branch.objects.create(session=session, is_current=False)
    branch_make_current(session.pk, branch.pk)
    branch.is_current = True
    events.branch_changed(session=session.pk, branch=branch.pk)
    return branch


@transaction.atomic
def branch_activate(*, branch: Branch) -> Branch:
    """Make `branch` the current branch of its session."""
    lock_session(branch.session_id)
    if not Branch.objects.filter(pk=branch.pk).exists():
        raise BranchNotFound()
    branch_make_current(branch.session_id, branch.pk)
    branch.is_current = True
    events.branch_changed(session=branch.session_id, branch=branch.pk)
    return branch


@transaction.atomic
def branch_rename(*, branch: Branch, name: Any) -> Branch:
    """Give a branch a name (1 to NAME_MAX_LENGTH characters, trimmed). Announced as
    `branch.changed` naming the session's current branch, which a rename does not move: the
    event tells watchers the branches changed (so they read them again) without claiming a
    switch; `session.changed` would claim the session itself was renamed."""
    clean = clean_name(name, what="branch")
    lock_session(branch.session_id)
    if not Branch.objects.filter(pk=branch.pk).update(name=clean):
        raise BranchNotFound()
    branch.name = clean
    current = (
        Branch.objects.filter(session_id=branch.session_id, is_current=True)
        .values_list("pk", flat=True)
        .first()
    )
    events.branch_changed(session=branch.session_id, branch=current or branch.pk)
    return branch


def branch_set_state(*, branch: Branch, session_state: Any) -> Branch:
    """Store the state the agent left after a turn. It is model output: text a database cannot
    store is cleaned, not refused; a state deeper than JSON_MAX_DEPTH (InvalidInput) or larger
    than ROLLBACK_STATE_MAX_BYTES (TooLarge) is refused (before anything is written, so a
    caller's transaction goes on), and the stored state stays as it was. A state equal to the
    branch's (as the caller read it, under the session's lock: a turn's store) is not written
    again; nor does it take a savepoint of its own inside the caller's transaction."""
    state = clean_session_state(session_state, model_output=True)
    if state == branch.session_state:
        return branch
    with transaction.atomic(savepoint=False):
        lock_session(branch.session_id)
        if not Branch.objects.filter(pk=branch.pk).update(session_state=state):
            raise BranchNotFound()
    branch.session_state = state
    return branch
