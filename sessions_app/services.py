"""Writes to sessions, branches and messages. Each is all-or-nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import User
from accounts.services import lock_user
from core import events
from core.errors import InvalidInput
from core.model_choice import check_model_settings
from core.validation import (
    JSONObject,
    clean_metadata,
    clean_name,
    clean_session_state,
    storable_text,
)
from sessions_app.errors import (
    BranchNotFound,
    RewindOutOfRange,
    SessionLimitReached,
    SessionNotFound,
)

from .keys import clean_session_key, parse_session_key
from .models import Branch, Message, Session, Summary
from .selectors import branch_history, fork_mark, sessions_idle

if TYPE_CHECKING:
    from datetime import datetime

    from .models import Checkpoint

DEFAULT_SESSION_NAME = "New session"


def session_quota_check(*, owner: User) -> None:
    """Refuse one more session when `owner` has ROLLBACK_MAX_SESSIONS_PER_USER (archived ones
    count). Call it in the transaction that creates the session: it locks the owner's row, so two
    creations at once cannot both take the last place."""
    lock_user(owner.pk)
    limit = settings.ROLLBACK_MAX_SESSIONS_PER_USER
    count = Session.objects.filter(owner=owner).count()
    if count >= limit:
        raise SessionLimitReached(count, limit)


@transaction.atomic
def session_create(
    *,
    owner: User,
    name: str | None = None,
    metadata: Any = None,
    session_key: str = "",
) -> Session:
    """A new session with its first, current, empty branch. Its settings may choose only an
    allowed model and temperature (core.model_choice). With `session_key` (sessions_app.keys),
    integrations find it by that key (`session_for_key`); a key the owner already uses is
    refused by the database (IntegrityError)."""
    name = clean_name(name, what="session", default=DEFAULT_SESSION_NAME)
    metadata = clean_metadata(metadata, what="session metadata")
    check_model_settings(metadata)
    if session_key:
        session_key = clean_session_key(session_key)
    session_quota_check(owner=owner)
    session = Session.objects.create(
        owner=owner, session_name=name, metadata=metadata, session_key=session_key
    )
    Branch.objects.create(session=session, is_current=True)
    events.sessions_changed(user=owner.pk, session=session.pk, change="created")
    return session


def session_for_key(*, owner: User, session_key: Any) -> Session:
    """The owner's session of `session_key`, made on first use (named after the key's parts,
    see `SessionKey.default_name`). A malformed key is refused (InvalidSessionKey) before
    anything is read or written. Race-free: the creation holds the lock on the owner's row
    (`session_quota_check`) and looks again once it has it, so two first uses at once make one
    session; the unique constraint (owner, session_key) backs it up. An archived session of the
    key is still its session."""
    key = parse_session_key(session_key)
    text = str(key)
    mine = Session.objects.filter(owner=owner, session_key=text)
    found = mine.first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            session_quota_check(owner=owner)
            found = mine.first()
            if found is not None:
                return found
            return session_create(owner=owner, name=key.default_name, session_key=text)
    except IntegrityError:
        found = mine.first()
        if found is None:
            raise
        return found


def _since(when: datetime | None, state: bool) -> datetime | None:
    """A state kept as the time it began (archived, pinned): set keeps its first time."""
    if not state:
        return None
    return when or timezone.now()


@transaction.atomic
def session_update(
    *,
    session: Session,
    name: str | None = None,
    metadata: Any = None,
    archived: bool | None = None,
    pinned: bool | None = None,
) -> Session:
    """Rename a session, replace its metadata, archive it or bring it back (`archived`), pin it
    to the top of its owner's list or unpin it (`pinned`); every change is announced
    (`session.changed` to its watchers, and its owner's lists). A pin alone is no activity: it
    leaves `updated_at` (the list's order below the pinned ones). Under the session's lock, like
    every write: a session deleted meanwhile is SessionNotFound."""
    if name is not None:
        name = clean_name(name, what="session")
    if metadata is not None:
        metadata = clean_metadata(metadata, what="session metadata")
        check_model_settings(metadata)
    lock_session(session.pk)
    active = name is not None or metadata is not None or archived is not None
    fields = ["updated_at"] if active else []
    if archived is not None:
        session.archived_at = _since(session.archived_at, archived)
        fields.append("archived_at")
    if pinned is not None:
        session.pinned_at = _since(session.pinned_at, pinned)
        fields.append("pinned_at")
    if name is not None:
        session.session_name = name
        fields.append("session_name")
    if metadata is not None:
        session.metadata = metadata
        fields.append("metadata")
    if active:
        session.updated_at = timezone.now()
    if fields:
        session.save(update_fields=fields)
    events.session_changed(
        session=session.pk,
        name=session.session_name,
        archived=session.archived_at is not None,
        pinned=session.pinned_at is not None,
        metadata=session.metadata,
    )
    events.sessions_changed(user=session.owner_id, session=session.pk, change="changed")
    return session


@transaction.atomic
def session_settings_update(
    *, session: Session, model: str | None = None, instructions: str | None = None
) -> Session:
    """Change one or both of the session's `metadata.settings.model` and `.instructions` (None:
    left as it is; "": back to the default, none) and keep the rest of its metadata, through
    `session_update` (checked like any metadata, announced as `session.changed`). The metadata
    is read under the session's lock, so two changes at once both stay."""
    locked = lock_session(session.pk)
    metadata = dict(locked.metadata) if isinstance(locked.metadata, dict) else {}
    chosen = metadata.get("settings")
    chosen = dict(chosen) if isinstance(chosen, dict) else {}
    for key, value in (("model", model), ("instructions", instructions)):
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidInput(f"The session's {key} must be text.")
        if value.strip():
            chosen[key] = value.strip()
        else:
            chosen.pop(key, None)
    metadata["settings"] = chosen
    updated = session_update(session=locked, metadata=metadata)
    session.metadata, session.updated_at = updated.metadata, updated.updated_at
    return updated


@transaction.atomic
def session_archive_if_idle(*, session_id: int, since: datetime) -> bool:
    """Archive a session that is still idle since `since` once its lock is held (a message or a
    turn that came meanwhile keeps it listed). Announced like any archiving (`session.changed`);
    its owner brings it back from the Archived list. Returns whether it was archived."""
    try:
        lock_session(session_id)
    except SessionNotFound:
        return False
    session = sessions_idle(since=since).filter(pk=session_id).first()
    if session is None:
        return False
    session_update(session=session, archived=True)
    return True


@transaction.atomic
def session_title_set(*, session: Session, title: str) -> Session | None:
    """Give an untitled session (still named DEFAULT_SESSION_NAME) the title the model wrote
    for it; None, and nothing changes, when it has a name by now (a rename while the model was
    writing wins). Announced like any rename (`session.changed`)."""
    locked = lock_session(session.pk)
    if locked.session_name != DEFAULT_SESSION_NAME:
        return None
    updated = session_update(session=locked, name=title)
    session.session_name, session.updated_at = updated.session_name, updated.updated_at
    return updated


@transaction.atomic
def session_delete(*, session: Session) -> None:
    """Delete a session with all its branches, messages, checkpoints and turns; the sockets
    watching it close. It takes the session's lock first, like every other write, and only then
    deletes the rows below it: deleting those first would hold their locks while waiting for the
    session's, the reverse order of a writer, and deadlock with it. A writer that was waiting
    for the lock then finds the session gone (SessionNotFound); one already gone is too."""
    lock_session(session.pk)
    Session.objects.filter(pk=session.pk).delete()
    events.sockets_close_session(session=session.pk)
    events.sessions_changed(user=session.owner_id, session=session.pk, change="deleted")


def _lock_branch(branch_id: int) -> Branch:
    try:
        return Branch.objects.select_for_update().get(pk=branch_id)
    except Branch.DoesNotExist:
        raise BranchNotFound() from None


@transaction.atomic
def message_append(
    *,
    branch: Branch,
    role: str,
    content: str = "",
    tool_name: str = "",
    tool_args: Any = None,
    tool_result: str = "",
    tool_call_id: str = "",
    tool_calls: Any = None,
    metadata: JSONObject | None = None,
) -> Message:
    """Append one message at the end of the branch's history (under the session's lock, like
    every structural change of a branch)."""
    if role not in Message.Role.values:
        raise InvalidInput(f"Unknown message role {role!r}.")
    if not isinstance(content, str):
        raise InvalidInput("Message content must be text.")
    lock_session(branch.session_id)
    return message_append_locked(
        branch=branch,
        locked=_lock_branch(branch.pk),
        role=role,
        content=content,
        tool_name=tool_name,
        tool_args=tool_args,
        tool_result=tool_result,
        tool_call_id=tool_call_id,
        tool_calls=tool_calls,
        metadata=metadata,
    )


def message_append_locked(
    *,
    branch: Branch,
    locked: Branch,
    role: str,
    content: str = "",
    tool_name: str = "",
    tool_args: Any = None,
    tool_result: str = "",
    tool_call_id: str = "",
    tool_calls: Any = None,
    metadata: JSONObject | None = None,
) -> Message:
    """`message_append` for a caller already inside a transaction holding the session's lock,
    with `locked`, the branch's row as read under that lock (turn_start): no second lock, no
    second read of the branch."""
    message = Message.objects.create(
        branch_id=locked.pk,
        position=locked.message_count,
        role=role,
        content=storable_text(content),
        tool_name=tool_name or "",
        tool_args=tool_args,
        tool_result=tool_result or "",
        tool_call_id=tool_call_id or "",
        tool_calls=tool_calls,
        metadata=clean_metadata(metadata, what="message metadata"),
    )
    Branch.objects.filter(pk=locked.pk).update(message_count=F("message_count") + 1)
    Session.objects.filter(pk=locked.session_id).update(updated_at=timezone.now())
    branch.message_count = locked.message_count = locked.message_count + 1
    return message


def branch_make_current(session_id: int, branch_id: int) -> None:
    """Move the session's current flag to `branch_id`. Call with the session row locked."""
    Branch.objects.filter(session_id=session_id, is_current=True).exclude(pk=branch_id).update(
        is_current=False
    )
    Branch.objects.filter(pk=branch_id).update(is_current=True)


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


@transaction.atomic
def branch_fork(
    *,
    branch: Branch,
    position: int,
    forked_from: Checkpoint | None = None,
    session_state: JSONObject | None = None,
    make_current: bool = True,
    metadata: JSONObject | None = None,
    file_mark: int | None = None,
) -> Branch:
    """A new branch whose history is `branch`'s first `position` messages, and whose workspace
    is `branch`'s as of `file_mark` (a checkpoint's `files_mark`; by default, the files as they
    stood when the message at `position` was sent: selectors.fork_mark). Copies no message and
    no file. The one way a branch is made: restoring a checkpoint (`forked_from`), editing or
    regenerating a message, and a rollback the agent asks for all come here."""
    lock_session(branch.session_id)
    parent = _lock_branch(branch.pk)
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
        forked_from=forked_from,
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
            checkpoint=forked_from.pk if forked_from is not None else None,
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


@transaction.atomic
def branch_set_state(*, branch: Branch, session_state: Any) -> Branch:
    """Store the state the agent left after a turn. It is model output: text a database cannot
    store is cleaned, not refused; a state deeper than JSON_MAX_DEPTH (InvalidInput) or larger
    than ROLLBACK_STATE_MAX_BYTES (TooLarge) is refused, and the stored state stays as it was."""
    state = clean_session_state(session_state, model_output=True)
    lock_session(branch.session_id)
    if not Branch.objects.filter(pk=branch.pk).update(session_state=state):
        raise BranchNotFound()
    branch.session_state = state
    return branch


def summary_store(
    *,
    branch: Branch,
    end: int,
    content: str,
    model: str,
    metadata: JSONObject | None = None,
) -> Summary:
    """Keep the model's summary of the branch's history below position `end`, keyed by the
    message at `end - 1` so every branch sharing that prefix finds it. A summary of the same
    prefix written meanwhile by another worker is kept and returned instead."""
    last = branch_history(branch, start=end - 1, end=end)
    if not last:
        raise InvalidInput("There is nothing to summarise below that position.")
    existing = Summary.objects.filter(last_message_id=last[0].pk).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return Summary.objects.create(
                last_message_id=last[0].pk,
                end_position=end,
                content=storable_text(content),
                model=model[:200],
                metadata=metadata or {},
            )
    except IntegrityError:
        return Summary.objects.get(last_message_id=last[0].pk)
