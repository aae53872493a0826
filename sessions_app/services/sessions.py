"""Writes to sessions: create (within the owner's quota), find or make one by its key, update,
change its settings, archive, title, delete."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from access.selectors import model_check
from accounts.models import User
from accounts.services import lock_user
from core import events
from core.errors import InvalidInput
from core.model_choice import check_model_settings
from core.validation import clean_metadata, clean_name
from sessions_app.errors import SessionLimitReached, SessionNotFound

from .. import hooks
from ..keys import clean_session_key, parse_session_key
from ..models import Branch, Session
from ..models.session import DEFAULT_SESSION_NAME
from ..selectors import sessions_blank, sessions_idle
from .locks import lock_session

if TYPE_CHECKING:
    from datetime import datetime


def session_quota_check(*, owner: User) -> None:
    """Refuse one more session when `owner` has ROLLBACK_MAX_SESSIONS_PER_USER (archived ones
    count). Call it in the transaction that creates the session: it locks the owner's row, so two
    creations at once cannot both take the last place."""
    lock_user(owner.pk)
    limit = settings.ROLLBACK_MAX_SESSIONS_PER_USER
    count = Session.objects.filter(owner=owner).count()
    if count >= limit:
        raise SessionLimitReached(count, limit)


def _model_in(metadata: Any) -> str | None:
    chosen = metadata.get("settings") if isinstance(metadata, dict) else None
    model = chosen.get("model") if isinstance(chosen, dict) else None
    return model.strip() if isinstance(model, str) and model.strip() else None


def check_model_access(owner: User, metadata: Any, *, before: Any = None) -> None:
    """Refuse settings that choose a model `owner`'s access does not include (ModelNotAllowed,
    a 400): the picker and the API offer only theirs (access.selectors.models_for). A choice
    kept as it was (`before`) is left to the turns, which refuse it: other settings can still
    be changed."""
    model = _model_in(metadata)
    if model is not None and model != _model_in(before):
        model_check(owner, model)


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
    check_model_access(owner, metadata)
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


# How many of the owner's blank sessions `session_new_or_blank` looks at, newest first, for one
# that nothing above keeps (hooks.session_holds): a bound on its queries under the owner's lock.
BLANK_LOOKS = 10


def _untouched(session: Session) -> bool:
    """No settings or metadata of its own (settings put back to the defaults count as none) and
    nothing the apps above keep of it (workspace files, checkpoints)."""
    metadata = session.metadata
    plain = metadata == {} or (isinstance(metadata, dict) and not any(metadata.values()))
    return plain and not hooks.session_holds(session.pk)


def _blank_reused(owner: User) -> Session | None:
    """The owner's newest blank session (`sessions_blank`, `_untouched`), locked, looked at
    again under its lock (a message may have come meanwhile) and made the most recently active,
    so it heads the list; None when there is none."""
    for candidate in sessions_blank(owner)[:BLANK_LOOKS]:
        if not _untouched(candidate):
            continue
        try:
            locked = lock_session(candidate.pk)
        except SessionNotFound:  # deleted meanwhile
            continue
        if not (sessions_blank(owner).filter(pk=locked.pk).exists() and _untouched(locked)):
            continue
        locked.updated_at = timezone.now()
        locked.save(update_fields=["updated_at"])
        events.sessions_changed(user=owner.pk, session=locked.pk, change="changed")
        return locked
    return None


@transaction.atomic
def session_new_or_blank(*, owner: User) -> Session:
    """The session the chat page's "New session" opens: the owner's newest blank session (never
    named, no message, turn, settings, workspace file or checkpoint; not archived or pinned),
    brought to the top of their list, else a new one (`session_create`). So "New session" never
    piles up empty sessions, and two at once (a double click, a click again while the answer is
    slow) end with one: both take the lock on the owner's row first (the one every creation
    takes, `session_quota_check`), and the second finds the session the first made. The API
    makes a session at each call (`session_create`): integrators count on it."""
    lock_user(owner.pk)
    return _blank_reused(owner) or session_create(owner=owner)


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
        check_model_access(session.owner, metadata, before=session.metadata)
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
    *,
    session: Session,
    model: str | None = None,
    instructions: str | None = None,
    test_command: str | None = None,
    checkpoint_each_message: bool | Literal["default"] | None = None,
) -> Session:
    """Change some of the session's `metadata.settings.model`, `.instructions` and
    `.test_command` (None: left as it is; "": back to the default, none) and
    `.checkpoint_each_message` (True or False; "default": the owner's preference decides) and
    keep the rest of its metadata, through
    `session_update` (checked like any metadata, announced as `session.changed`). The metadata
    is read under the session's lock, so two changes at once both stay."""
    locked = lock_session(session.pk)
    metadata = dict(locked.metadata) if isinstance(locked.metadata, dict) else {}
    chosen = metadata.get("settings")
    chosen = dict(chosen) if isinstance(chosen, dict) else {}
    for key, value in (
        ("model", model),
        ("instructions", instructions),
        ("test_command", test_command),
    ):
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidInput(f"The session's {key} must be text.")
        if value.strip():
            chosen[key] = value.strip()
        else:
            chosen.pop(key, None)
    if checkpoint_each_message == "default":
        chosen.pop("checkpoint_each_message", None)
    elif checkpoint_each_message is not None:
        chosen["checkpoint_each_message"] = checkpoint_each_message  # checked with the metadata
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
