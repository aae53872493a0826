"""Importing a document: Rollback's own export (checkpoints.transfer), or another app's export
of one conversation (a session at once) or of several (an `ImportJob`, run by a task).

Bounds: the document's size (ROLLBACK_IMPORT_MAX_BYTES), its number of conversations
(ROLLBACK_IMPORT_MAX_CONVERSATIONS), each conversation's number of messages
(ROLLBACK_IMPORT_MAX_MESSAGES) and each message's length (as an imported Rollback message). Each
conversation is written in a transaction of its own: in a job, one that cannot be imported is
reported and the others go on.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import DataError, IntegrityError, transaction
from django.utils import timezone

from checkpoints.models import ImportJob
from checkpoints.transfer import session_import_document
from checkpoints.transfer_doc import read_document, validate_export
from core import events
from core.errors import DomainError, InvalidInput
from core.validation import NAME_MAX_LENGTH, clean_name, storable_text
from sessions_app.errors import ImportRejected, ImportTooLarge
from sessions_app.models import Branch, Message, Session
from sessions_app.services import session_quota_check
from sessions_app.turns import message_limits_check

from .formats import Conversation, foreign_doc, read_conversation
from .tree import PlannedBranch, plan_branches

if TYPE_CHECKING:
    from accounts.models import User

log = logging.getLogger(__name__)
UNTITLED = "Untitled"
NOT_AN_EXPORT = (
    "Not a Rollback session export, nor a ChatGPT (conversations.json), Open WebUI or "
    "LibreChat export."
)


@dataclass
class Imported:
    """An import made now: the session, and what it left out (counted by kind)."""

    session: Session
    skipped: dict[str, int] = field(default_factory=dict)


def history_import(*, owner: User, raw: bytes | str, filename: str = "") -> Imported | ImportJob:
    """Import `raw` for `owner`: Rollback's own export or one conversation of another app as a
    session now (Imported); an export of several conversations as a queued job (start it once the
    transaction has committed: the task `checkpoints.run_import`). A document that cannot be
    read, is of no known shape, or is over a bound raises ImportRejected (ImportTooLarge) and
    nothing is written."""
    data = read_document(raw)
    doc = foreign_doc(data)
    if doc is None:
        if isinstance(data, dict):  # Rollback's own export: its checks say what is wrong
            return Imported(session=session_import_document(owner=owner, doc=validate_export(data)))
        if data == []:
            raise ImportRejected("The export holds no conversation.")
        raise ImportRejected(NOT_AN_EXPORT)
    limit = settings.ROLLBACK_IMPORT_MAX_CONVERSATIONS
    if len(doc.items) > limit:
        raise ImportTooLarge(
            f"The export holds {len(doc.items)} conversations; the limit is {limit} per file."
        )
    if len(doc.items) == 1:
        conversation = read_conversation(doc.items[0], 0)
        where = "The conversation"
        session = conversation_import(owner=owner, conversation=conversation, where=where)
        return Imported(session=session, skipped=dict(conversation.skipped))
    job = ImportJob.objects.create(
        owner=owner,
        source=doc.source,
        filename=storable_text(filename)[:NAME_MAX_LENGTH],
        total=len(doc.items),
        document=raw.encode() if isinstance(raw, str) else raw,
    )
    return job


def conversation_import(*, owner: User, conversation: Conversation, where: str) -> Session:
    """One conversation as a new session of `owner`, in one transaction; its tree checked and
    bounded first (ImportRejected, ImportTooLarge, MessageTooLong)."""
    plan = plan_branches(conversation, max_nodes=settings.ROLLBACK_IMPORT_MAX_MESSAGES, where=where)
    for branch in plan:
        for node in branch.messages:
            message_limits_check(
                what=f"message {node.id!r} of {where[0].lower()}{where[1:]}",
                role=node.role or "",
                content=node.text,
                tool_result="",
                tool_args=None,
                tool_calls=None,
            )
    try:
        return _write(owner, conversation, plan)
    except (DataError, IntegrityError) as exc:
        raise ImportRejected(f"{where} could not be stored: {exc}".strip()) from None


def _name(title: str) -> str:
    name = " ".join(storable_text(title).split())
    if len(name) > NAME_MAX_LENGTH:
        name = name[: NAME_MAX_LENGTH - 1].rstrip() + "…"
    try:
        return clean_name(name, what="session", default=UNTITLED)
    except InvalidInput:
        return UNTITLED


@transaction.atomic
def _write(owner: User, conversation: Conversation, plan: list[PlannedBranch]) -> Session:
    session_quota_check(owner=owner)
    times = [n.created_at for b in plan for n in b.messages if n.created_at is not None]
    started = conversation.created_at or min(times, default=None) or timezone.now()
    session = Session.objects.create(
        owner=owner,
        session_name=_name(conversation.title),
        metadata={"imported_from": conversation.source},
        created_at=started,
        updated_at=max([started, *times]),
    )
    events.sessions_changed(user=owner.pk, session=session.pk, change="created")
    made: list[Branch] = []
    for planned in plan:
        first = planned.messages[0].created_at or started
        branch = Branch.objects.create(
            session=session,
            parent=made[planned.parent] if planned.parent is not None else None,
            fork_position=planned.fork_position,
            message_count=planned.fork_position + len(planned.messages),
            is_current=planned.is_current,
            created_at=first,
        )
        made.append(branch)
        Message.objects.bulk_create(_messages(branch, planned, first), batch_size=1000)
    return session


def _messages(branch: Branch, planned: PlannedBranch, first: datetime) -> list[Message]:
    """The branch's own messages; one without a time takes the time of the one before it."""
    out = []
    at = first
    for i, node in enumerate(planned.messages):
        at = node.created_at or at
        out.append(
            Message(
                branch=branch,
                position=planned.fork_position + i,
                role=str(node.role),  # planned messages are kept ones: user or assistant
                content=storable_text(node.text),
                created_at=at,
            )
        )
    return out


# --- The job ------------------------------------------------------------------------------------


def _title(item: object) -> str:
    title = item.get("title") if isinstance(item, dict) else None
    return storable_text(title)[:NAME_MAX_LENGTH] if isinstance(title, str) else ""


def import_job_run(*, job_id: int) -> ImportJob | None:
    """Run a queued job: each conversation imported in its own transaction, the job's progress
    stored after each. None when the job is not queued (a task delivered twice does nothing)."""
    if not ImportJob.objects.filter(pk=job_id, status=ImportJob.Status.QUEUED).update(
        status=ImportJob.Status.RUNNING
    ):
        return None
    job = ImportJob.objects.select_related("owner").get(pk=job_id)
    try:
        _run(job)
    except Exception as exc:  # whatever stops it, the job says so instead of running forever
        log.exception("import %s stopped", job_id)
        ImportJob.objects.filter(pk=job_id).update(
            status=ImportJob.Status.FAILED,
            error=f"The import stopped: {exc}",
            document=b"",
            finished_at=timezone.now(),
        )
    job.refresh_from_db()
    return job


def _run(job: ImportJob) -> None:
    doc = foreign_doc(json.loads(bytes(job.document)))
    items = doc.items if doc is not None else []
    sessions: list[int] = []
    skipped: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        where = f"Conversation {index + 1}"
        try:
            conversation = read_conversation(item, index)
            session = conversation_import(owner=job.owner, conversation=conversation, where=where)
        except DomainError as exc:  # bad, too large, or no room left: reported, the rest go on
            failures.append({"index": index, "title": _title(item), "error": exc.message})
        else:
            sessions.append(session.pk)
            skipped.update(conversation.skipped)
        ImportJob.objects.filter(pk=job.pk).update(
            done=index + 1, sessions=sessions, skipped=dict(skipped), failures=failures
        )
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJob.Status.DONE, document=b"", finished_at=timezone.now()
    )
