"""Export a session as one versioned JSON document, and import one as a new session.

The document holds every branch with its own messages and its checkpoints; references between
them (a branch's parent, the checkpoint it was forked from) use the ids of the exporting server.
The workspace's files and their marks travel too (checkpoints.transfer_files), and the effects
ledger (checkpoints.transfer_ledger).
Import checks the whole document before writing anything (its shape and checks are
checkpoints.transfer_doc), then writes it in one transaction.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import DataError, IntegrityError, transaction
from django.utils import timezone

from checkpoints.models import Checkpoint
from core import events
from core.validation import NAME_MAX_LENGTH, storable_text
from sessions_app.errors import ImportRejected
from sessions_app.models import Branch, Message, Session
from sessions_app.selectors import without_cyclic_gc
from sessions_app.services import session_quota_check

from .transfer_doc import EXPORT_FORMAT, EXPORT_VERSION, ExportDoc, parse_export
from .transfer_files import files_export, files_import
from .transfer_ledger import ledger_export, ledger_import

if TYPE_CHECKING:
    from accounts.models import User


_MESSAGE_FIELDS = (
    "branch_id",
    "position",
    "role",
    "content",
    "tool_name",
    "tool_args",
    "tool_result",
    "tool_call_id",
    "tool_calls",
    "effect",
    "created_at",
    "metadata",
)


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value else None


def session_export(*, session: Session) -> dict[str, Any]:
    """The whole session, every branch with its own messages and checkpoints."""
    branches = list(Branch.objects.filter(session=session).order_by("created_at", "id"))
    files = files_export(session)
    by_branch: dict[int, dict[str, Any]] = {}
    for b in _parents_first(branches):
        by_branch[b.pk] = {
            "id": b.pk,
            "name": b.name,
            "parent": b.parent_id,
            "fork_position": b.fork_position,
            "forked_from": b.forked_from_id,
            "is_current": b.is_current,
            "session_state": b.session_state,
            "metadata": b.metadata,
            "created_at": _iso(b.created_at),
            "fork_files_upto": files.upto(b.fork_file_mark),
            "messages": [],
            "checkpoints": [],
        }
    messages = (
        Message.objects.filter(branch__session=session)
        .order_by("branch_id", "position")
        .values(*_MESSAGE_FIELDS)
    )
    with without_cyclic_gc():
        for row in messages.iterator(chunk_size=2000):
            branch_id = row.pop("branch_id")
            row["created_at"] = _iso(row["created_at"])
            by_branch[branch_id]["messages"].append(row)
    checkpoints = Checkpoint.objects.filter(branch__session=session).order_by("branch_id", "id")
    for cp in checkpoints.iterator(chunk_size=2000):
        by_branch[cp.branch_id]["checkpoints"].append(
            {
                "id": cp.pk,
                "name": cp.checkpoint_name,
                "description": cp.description,
                "is_auto": cp.is_auto,
                "message_count": cp.message_count,
                "session_state": cp.session_state,
                "metadata": cp.metadata,
                "created_at": _iso(cp.created_at),
                "files_upto": files.upto(cp.files_mark),
            }
        )
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": _iso(timezone.now()),
        "session": {
            "name": session.session_name,
            "metadata": session.metadata,
            "created_at": _iso(session.created_at),
            "session_key": session.session_key or None,
            "pinned_at": _iso(session.pinned_at),
        },
        "branches": list(by_branch.values()),
        "files": files.files,
        "effects": ledger_export(session, set(by_branch)),
    }


def _parents_first(branches: list[Branch]) -> list[Branch]:
    known: set[int] = set()
    ordered: list[Branch] = []
    pending = list(branches)
    while pending:
        rest = []
        for b in pending:
            if b.parent_id is None or b.parent_id in known:
                ordered.append(b)
                known.add(b.pk)
            else:
                rest.append(b)
        if len(rest) == len(pending):  # parents outside the session: cannot happen
            ordered.extend(rest)
            break
        pending = rest
    return ordered


def _when(value: datetime | None) -> datetime:
    if value is None:
        return timezone.now()
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)


def session_import(*, owner: User, raw: bytes | str) -> Session:
    """Import a document made by `session_export` as a new session of `owner`.

    The whole document is checked first; a malformed, oversized or wrong-version document raises
    ImportRejected (ImportTooLarge) and nothing is written.
    """
    return session_import_document(owner=owner, doc=parse_export(raw))


def session_import_document(*, owner: User, doc: ExportDoc) -> Session:
    """Import a document already checked (`parse_export`, `validate_export`), in one
    transaction."""
    try:
        return _write(owner, doc)
    except (DataError, IntegrityError) as exc:
        # What the checks above cannot see (say, a NUL character inside JSON, which PostgreSQL
        # refuses): the transaction is rolled back and the user told why.
        raise ImportRejected(f"The document could not be stored: {exc}".strip()) from None


def _free_key(owner: User, key: str | None) -> str:
    """The imported session keeps its session key when the owner has no session of that key
    (a conversation moved to another account or server goes on answering its integration);
    otherwise it gets none, and the session already at that key keeps it (an import never takes
    a key over). Call it holding the owner's lock (`session_quota_check`)."""
    if not key or Session.objects.filter(owner=owner, session_key=key).exists():
        return ""
    return key


IMPORTED = " (imported)"


def _copy_name(owner: User, name: str) -> str | None:
    """The copy's name when the owner already has a session of this name (the original, most
    likely: an export imported again), so that the two rows tell apart; None when the name is
    free (a conversation moved to another account or server keeps its name)."""
    if not Session.objects.filter(owner=owner, session_name=name).exists():
        return None
    return name[: NAME_MAX_LENGTH - len(IMPORTED)].rstrip() + IMPORTED


@transaction.atomic
def _write(owner: User, doc: ExportDoc) -> Session:
    session_quota_check(owner=owner)
    name = doc.session.name.strip()
    copy_name = _copy_name(owner, name)
    # A copy beside its original is not pinned (two identical pinned rows otherwise); a moved
    # conversation keeps its pin.
    pinned = doc.session.pinned_at if copy_name is None else None
    session = Session.objects.create(
        owner=owner,
        session_name=copy_name or name,
        metadata=doc.session.metadata,
        created_at=_when(doc.session.created_at),
        session_key=_free_key(owner, doc.session.session_key),
        pinned_at=_when(pinned) if pinned else None,
    )
    events.sessions_changed(user=owner.pk, session=session.pk, change="created")
    branch_ids: dict[int, int] = {}
    checkpoint_ids: dict[int, int] = {}
    made_branches: list[tuple[Branch, int | None]] = []
    made_checkpoints: list[tuple[Checkpoint, int]] = []
    for b in doc.branches:
        branch = Branch.objects.create(
            session=session,
            parent_id=branch_ids[b.parent] if b.parent is not None else None,
            fork_position=b.fork_position,
            forked_from_id=checkpoint_ids[b.forked_from] if b.forked_from is not None else None,
            message_count=b.fork_position + len(b.messages),
            name=b.name.strip(),
            session_state=b.session_state,
            is_current=b.is_current,
            checkpoint_count=len(b.checkpoints),
            created_at=_when(b.created_at),
            metadata=b.metadata,
        )
        branch_ids[b.id] = branch.pk
        made_branches.append((branch, b.fork_files_upto))
        # Imported tool messages keep their effect; the ledger's entries come from the
        # document's own `effects` (ledger_import, below), not from these messages.
        Message.objects.bulk_create(
            (
                Message(
                    branch=branch,
                    position=m.position,
                    role=m.role,
                    # Conversation text is cleaned as a model's is (core.validation).
                    content=storable_text(m.content),
                    tool_name=storable_text(m.tool_name),
                    tool_args=m.tool_args,
                    tool_result=storable_text(m.tool_result or ""),
                    tool_call_id=storable_text(m.tool_call_id),
                    tool_calls=m.tool_calls,
                    effect=m.effect,
                    created_at=_when(m.created_at),
                    metadata=m.metadata,
                )
                for m in b.messages
            ),
            batch_size=1000,
        )
        for c in b.checkpoints:
            created = Checkpoint.objects.create(
                branch=branch,
                checkpoint_name=c.name.strip(),
                description=c.description,
                is_auto=c.is_auto,
                message_count=c.message_count,
                session_state=c.session_state,
                metadata=c.metadata,
                created_at=_when(c.created_at),
            )
            checkpoint_ids[c.id] = created.pk
            made_checkpoints.append((created, c.files_upto))
    files_import(
        session=session,
        files=doc.files,
        branches=made_branches,
        checkpoints=made_checkpoints,
        branch_ids=branch_ids,
    )
    ledger_import(session=session, effects=doc.effects, branch_ids=branch_ids)
    return session
