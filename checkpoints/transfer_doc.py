"""The session export document: its shape (pydantic models, strict: no unknown field), and its
checks (`parse_export`, `validate_export`): the whole document is checked, without touching the
database, before an import writes anything (checkpoints.transfer)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.errors import InvalidInput, TooLarge
from core.model_choice import check_model_settings
from core.validation import (
    DOCUMENT_MAX_DEPTH,
    NAME_MAX_LENGTH,
    JSONObject,
    clean_description,
    clean_json,
    clean_metadata,
    clean_name,
    clean_past_time,
    clean_session_state,
    json_too_deep,
)
from sessions_app.errors import ImportRejected, ImportTooLarge, MessageTooLong
from sessions_app.feedback import check_stored_feedback
from sessions_app.keys import parse_session_key
from sessions_app.turns import message_limits_check

from .transfer_files import BranchPlace, FilesDoc, files_check
from .transfer_ledger import BranchMessages, EffectDoc, effects_check

EXPORT_FORMAT = "rollback.session"
EXPORT_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


class MessageDoc(_Strict):
    position: int = Field(ge=0)
    role: Literal["user", "assistant", "system", "tool"]
    content: str = ""
    tool_name: str = Field(default="", max_length=200)
    tool_args: Any = None
    tool_result: str | None = ""
    tool_call_id: str = Field(default="", max_length=200)
    tool_calls: Any = None
    effect: Literal["", "none", "workspace", "external"] = ""
    created_at: datetime | None = None
    metadata: JSONObject = Field(default_factory=dict)


class CheckpointDoc(_Strict):
    id: int
    name: str = Field(max_length=NAME_MAX_LENGTH)
    description: str = ""
    is_auto: bool = False
    message_count: int = Field(ge=0)
    session_state: JSONObject = Field(default_factory=dict)
    metadata: JSONObject = Field(default_factory=dict)
    created_at: datetime | None = None
    # How many of the document's file versions its workspace covers (0: none, or no files).
    files_upto: int = Field(default=0, ge=0)


class BranchDoc(_Strict):
    id: int
    name: str = Field(default="", max_length=NAME_MAX_LENGTH)  # "": its default label
    parent: int | None = None
    fork_position: int = Field(default=0, ge=0)
    forked_from: int | None = None
    is_current: bool = False
    session_state: JSONObject = Field(default_factory=dict)
    metadata: JSONObject = Field(default_factory=dict)
    created_at: datetime | None = None
    # How many of the document's file versions its parent's workspace is seen up to (None: all).
    fork_files_upto: int | None = Field(default=None, ge=0)
    messages: list[MessageDoc] = Field(default_factory=list)
    checkpoints: list[CheckpointDoc] = Field(default_factory=list)


class SessionDoc(_Strict):
    name: str = Field(max_length=NAME_MAX_LENGTH)
    metadata: JSONObject = Field(default_factory=dict)
    created_at: datetime | None = None
    # Optional, so documents from before session keys (and pins) still import.
    session_key: str | None = None
    pinned_at: datetime | None = None


class ExportDoc(_Strict):
    format: Literal["rollback.session"]
    version: int
    exported_at: datetime | None = None
    session: SessionDoc
    branches: list[BranchDoc] = Field(min_length=1)
    files: FilesDoc | None = None  # None: a document from before the workspace
    # The effects ledger (checkpoints.transfer_ledger); empty in a document from before it.
    effects: list[EffectDoc] = Field(default_factory=list)


def _describe(error: ValidationError, data: dict[str, Any]) -> str:
    first = error.errors()[0]
    loc = list(first["loc"])
    where = ".".join(str(p) for p in loc) or "document"
    if len(loc) >= 2 and loc[0] == "effects" and isinstance(loc[1], int):
        # An entry of the ledger is named by its place and its id, as effects_check names it.
        entry = data["effects"][loc[1]]
        ident = entry.get("id") if isinstance(entry, dict) else None
        rest = ".".join(str(p) for p in loc[2:])
        where = f"effects entry {loc[1]} (id {ident!r})" + (f": {rest}" if rest else "")
    more = error.error_count() - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"Not a Rollback session export: {where}: {first['msg']}{tail}."


def read_document(raw: bytes | str) -> Any:
    """An imported document's JSON, within ROLLBACK_IMPORT_MAX_BYTES (ImportTooLarge), or
    ImportRejected saying why it cannot be read: Rollback's own export and other apps' alike
    (checkpoints.foreign)."""
    limit = settings.ROLLBACK_IMPORT_MAX_BYTES
    size = len(raw.encode() if isinstance(raw, str) else raw)
    if size > limit:
        raise ImportTooLarge(f"The document is {size} bytes; the limit is {limit} bytes.")
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ImportRejected(f"The document is not valid JSON: {exc}.") from None
    except RecursionError:
        raise _too_deep() from None


def parse_export(raw: bytes | str) -> ExportDoc:
    """Check a document completely, without touching the database."""
    return validate_export(read_document(raw))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _too_deep() -> ImportRejected:
    return ImportRejected(
        f"The document is nested more than {DOCUMENT_MAX_DEPTH} levels deep; an export never is."
    )


def validate_export(data: Any) -> ExportDoc:
    if not isinstance(data, dict):
        raise ImportRejected("Not a Rollback session export: the document must be a JSON object.")
    if json_too_deep(data, DOCUMENT_MAX_DEPTH):
        raise _too_deep()
    if data.get("format") != EXPORT_FORMAT:
        raise ImportRejected(f"Not a Rollback session export: 'format' must be {EXPORT_FORMAT!r}.")
    version = data.get("version")
    if version != EXPORT_VERSION or isinstance(version, bool):
        raise ImportRejected(
            f"Unsupported export version {version!r}: this server reads version {EXPORT_VERSION}."
        )
    try:
        doc = ExportDoc.model_validate(data)
    except ValidationError as exc:
        raise ImportRejected(_describe(exc, data)) from None
    _check_structure(doc)
    _check_values(doc)
    effects_check(
        doc.effects,
        {b.id: BranchMessages(b.fork_position, [m.role for m in b.messages]) for b in doc.branches},
    )
    files_check(
        doc.files,
        {
            b.id: BranchPlace(
                b.parent, b.fork_position, b.fork_position + len(b.messages), b.fork_files_upto
            )
            for b in doc.branches
        },
        {c.id: c.files_upto for b in doc.branches for c in b.checkpoints},
    )
    return doc


def _check_structure(doc: ExportDoc) -> None:
    """The document's branches form a tree whose positions, forks and checkpoints are consistent,
    with exactly one current branch and settings this server can use."""
    try:
        clean_name(doc.session.name, what="session")
        lengths: dict[int, int] = {}  # the history length of each branch read so far
        checkpoint_ids: set[int] = set()  # the checkpoints of the branches read so far
        for b in doc.branches:
            _check_branch_place(b, lengths, checkpoint_ids)
            _check_positions(b)
            lengths[b.id] = b.fork_position + len(b.messages)
            _check_checkpoints(b, lengths[b.id], checkpoint_ids)
    except ImportRejected:
        raise
    except InvalidInput as exc:
        raise ImportRejected(f"Not a Rollback session export: {exc.message}") from None
    current = sum(1 for b in doc.branches if b.is_current)
    if current != 1:
        raise ImportRejected(f"Exactly one branch must be current; the document has {current}.")
    try:
        check_model_settings(doc.session.metadata)
    except InvalidInput as exc:
        raise ImportRejected(f"The session cannot be imported: {exc.message}") from None


def _check_branch_place(b: BranchDoc, lengths: dict[int, int], checkpoint_ids: set[int]) -> None:
    """A new branch id, whose parent and the checkpoint it was forked from come before it, forked
    inside its parent's history."""
    where = f"branch {b.id}"
    if b.id in lengths:
        raise ImportRejected(f"Branch id {b.id} appears twice.")
    if b.parent is None:
        if b.fork_position != 0:
            raise ImportRejected(f"{where} has no parent, so its fork_position must be 0.")
    elif b.parent not in lengths:
        raise ImportRejected(f"{where} names parent {b.parent}, which does not come before it.")
    elif b.fork_position > lengths[b.parent]:
        raise ImportRejected(
            f"{where} forks at message {b.fork_position}, "
            f"but its parent has only {lengths[b.parent]}."
        )
    if b.forked_from is not None and b.forked_from not in checkpoint_ids:
        raise ImportRejected(
            f"{where} was forked from checkpoint {b.forked_from}, "
            "which is not in an earlier branch of the document."
        )


def _check_positions(b: BranchDoc) -> None:
    """The branch's own messages continue from its fork position without a gap."""
    for i, m in enumerate(b.messages):
        if m.position != b.fork_position + i:
            raise ImportRejected(
                f"branch {b.id}: message {i} has position {m.position}, "
                f"expected {b.fork_position + i}."
            )


def _check_checkpoints(b: BranchDoc, total: int, checkpoint_ids: set[int]) -> None:
    """Each checkpoint of the branch: a valid name and description, a new id, a position inside
    the branch's own part of the history (`total` is its length). Adds them to `checkpoint_ids`."""
    for c in b.checkpoints:
        clean_name(c.name, what="checkpoint")
        clean_description(c.description)
        if c.id in checkpoint_ids:
            raise ImportRejected(f"Checkpoint id {c.id} appears twice.")
        if not b.fork_position <= c.message_count <= total:
            raise ImportRejected(
                f"branch {b.id}: checkpoint {c.id} is at message {c.message_count}, "
                f"outside the branch's messages {b.fork_position} to {total}."
            )
        checkpoint_ids.add(c.id)


def _check_values(doc: ExportDoc) -> None:
    """What the database and the pages must be able to hold: every time between 1970 and
    tomorrow, every JSON value plain JSON (no NUL, no lone surrogate, no NaN, not too deep) and
    within its size limit."""

    def time(value: datetime | None, what: str) -> None:
        if value is not None:
            clean_past_time(value, what=what)

    try:
        time(doc.session.created_at, "session's created_at")
        time(doc.session.pinned_at, "session's pinned_at")
        clean_metadata(doc.session.metadata, what="session metadata")
        if doc.session.session_key:
            parse_session_key(doc.session.session_key)
        for b in doc.branches:
            where = f"branch {b.id}"
            time(b.created_at, f"created_at of {where}")
            clean_metadata(b.metadata, what=f"metadata of {where}")
            if b.name.strip():
                clean_name(b.name, what=f"{where}'s")
            clean_session_state(b.session_state, what=f"session state of {where}")
            for i, m in enumerate(b.messages):
                at = f"message {i} of {where}"
                time(m.created_at, f"created_at of {at}")
                clean_metadata(m.metadata, what=f"metadata of {at}")
                check_stored_feedback(m.role, m.metadata, what=at)  # a reply's rating
                clean_json(m.tool_args, what=f"tool_args of {at}")
                clean_json(m.tool_calls, what=f"tool_calls of {at}")
                message_limits_check(
                    what=at,
                    role=m.role,
                    content=m.content,
                    tool_result=m.tool_result or "",
                    tool_args=m.tool_args,
                    tool_calls=m.tool_calls,
                )
            for c in b.checkpoints:
                at = f"checkpoint {c.id}"
                time(c.created_at, f"created_at of {at}")
                clean_metadata(c.metadata, what=f"metadata of {at}")
                clean_session_state(c.session_state, what=f"session state of {at}")
    except (TooLarge, MessageTooLong) as exc:
        raise ImportTooLarge(f"Cannot import this document: {exc.message}") from None
    except InvalidInput as exc:
        raise ImportRejected(f"Cannot import this document: {exc.message}") from None
