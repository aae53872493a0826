"""Checkpoints, restores and retention.

A checkpoint is one row: a position in a branch plus the session state. Restoring as a branch is
one new branch row pointing at the checkpoint's branch and position. Neither copies a message, so
both cost the same at 10 messages as at 10,000. A rewind deletes what comes after the checkpoint,
which costs what there is to discard and no more.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from django.db import transaction
from django.db.models import Count, F, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from core import events
from core.errors import InvalidInput
from core.validation import JSONObject, clean_description, clean_metadata, clean_name
from sessions_app.errors import (
    BranchNotFound,
    RewindOutOfRange,
    SessionNotFound,
)
from sessions_app.models import Branch, Message, Session
from sessions_app.selectors import branch_lineage
from sessions_app.services import branch_fork, branch_make_current, lock_session
from workspace.selectors import file_mark, workspace_files
from workspace.services import files_match, lock_owner, versions_delete

from .captures import branches_drop
from .errors import CheckpointNotFound
from .models import Checkpoint
from .rewinds import rewind_cut, versions_keep
from .selectors import (
    auto_checkpoints_beyond,
    irreversible_effects,
    unused_checkpoint_name,
)

RestoreMode = Literal["branch", "rewind"]
RESTORE_MODES = ("branch", "rewind")
# What a restore brings back: the conversation and the files (`all`), or one of them.
RestoreScope = Literal["all", "conversation", "files"]
RESTORE_SCOPES = ("all", "conversation", "files")


def check_restore_choice(mode: object, scope: object) -> None:
    """InvalidInput, naming the values allowed, for an unknown mode or scope."""
    if mode not in RESTORE_MODES:
        raise InvalidInput(f"Unknown restore mode {mode!r}: use 'branch' or 'rewind'.")
    if scope not in RESTORE_SCOPES:
        raise InvalidInput(
            f"Unknown restore scope {scope!r}: use 'all', 'conversation' or 'files'."
        )


@dataclass(frozen=True)
class DeletedCheckpoint:
    id: int
    name: str
    branch_id: int
    message_count: int
    is_auto: bool


@dataclass
class RestoreResult:
    branch: Branch
    mode: str
    deleted_checkpoints: list[DeletedCheckpoint] = field(default_factory=list)
    # The external effects the restore left behind (selectors.irreversible_effects).
    irreversible: list[Message] = field(default_factory=list)
    scope: str = "all"
    # The paths whose new version the restore wrote (a files-only restore, or the workspace a
    # conversation-only one carried over from another branch).
    paths: list[str] = field(default_factory=list)


# How many of the effects a restore left behind the restored branch keeps for the model's
# instructions (agents.context), newest last, each bounded.
LEFT_BEHIND_KEPT = 20
LEFT_BEHIND_CHARS = 300


def left_behind(effects: list[Message]) -> list[JSONObject]:
    """The effects a restore left behind, as the restored branch's metadata keeps them."""
    return [
        {
            "message": m.pk,
            "ledger": (m.metadata or {}).get("ledger"),
            "tool_name": m.tool_name,
            "args": json_bounded(m.tool_args, LEFT_BEHIND_CHARS),
            "result": (m.tool_result or m.content)[:LEFT_BEHIND_CHARS],
            "created_at": m.created_at.isoformat(),
        }
        for m in effects[-LEFT_BEHIND_KEPT:]
    ]


def left_behind_after(*earlier: Any, effects: list[Message]) -> list[JSONObject]:
    """The effects the restores behind a branch have left behind (`earlier`: `left_behind`
    lists, as branches keep them), extended by this restore's `effects`: never replaced (a
    second rewind past other calls keeps the first one's record), one entry per call, oldest
    first, the newest LEFT_BEHIND_KEPT."""
    merged: dict[Any, JSONObject] = {}
    for entries in (*earlier, left_behind(effects)):
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict):
                # One entry per call: its ledger entry, or (kept before the ledger) its message.
                key = ("ledger", entry["ledger"]) if entry.get("ledger") else entry.get("message")
                merged.setdefault(key, entry)
    ordered = sorted(merged.values(), key=lambda e: str(e.get("created_at") or ""))
    return ordered[-LEFT_BEHIND_KEPT:]


def _kept(branch: Branch | None) -> Any:
    meta = branch.metadata if branch is not None else None
    return meta.get("left_behind") if isinstance(meta, dict) else None


def _not_in_history(entries: list[JSONObject], branch: Branch, end: int) -> list[JSONObject]:
    """The `left_behind` entries whose call is not a message of `branch`'s history below
    `end`."""
    ids = [m for m in (e.get("message") for e in entries) if isinstance(m, int)]
    if not ids:
        return entries
    uppers = dict(branch_lineage(branch, end=end))
    shown = {
        pk
        for pk, branch_id, position in Message.objects.filter(pk__in=ids).values_list(
            "pk", "branch_id", "position"
        )
        if position < uppers.get(branch_id, 0)
    }
    return [e for e in entries if e.get("message") not in shown]


def json_bounded(value: Any, limit: int) -> Any:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= limit else text[:limit] + "…"


def default_checkpoint_name() -> str:
    return timezone.now().strftime("checkpoint-%Y-%m-%d-%H%M%S")


@transaction.atomic
def checkpoint_create(
    *,
    branch: Branch,
    name: str | None = None,
    description: str | None = "",
    is_auto: bool = False,
    metadata: Any = None,
    at: int | None = None,
) -> Checkpoint:
    """Mark the branch's current position (or position `at` of its own part). One row; no
    message is read or copied. A checkpoint's name is unique in its session: a name already
    taken gets a number ("draft (2)", "after-write_file (2)"), so a rollback by name is never
    ambiguous and no two entries of a picker read the same."""
    clean = clean_name(name, what="checkpoint", default=default_checkpoint_name())
    text = clean_description(description)
    meta = clean_metadata(metadata, what="checkpoint metadata")
    lock_session(branch.session_id)
    clean = unused_checkpoint_name(branch.session_id, clean)
    try:
        locked = (
            Branch.objects.select_for_update()
            .only("id", "session_id", "fork_position", "message_count", "session_state")
            .get(pk=branch.pk)
        )
    except Branch.DoesNotExist:
        raise BranchNotFound() from None
    position = locked.message_count if at is None else at
    if not locked.fork_position <= position <= locked.message_count:
        raise RewindOutOfRange(f"Cannot place a checkpoint at message {position} of this branch.")
    checkpoint = Checkpoint.objects.create(
        branch_id=locked.pk,
        checkpoint_name=clean,
        description=text,
        is_auto=bool(is_auto),
        message_count=position,
        session_state=locked.session_state,
        files_mark=file_mark(),
        metadata=meta,
    )
    Branch.objects.filter(pk=locked.pk).update(checkpoint_count=F("checkpoint_count") + 1)
    events.checkpoint_created(
        session=locked.session_id,
        checkpoint=checkpoint.pk,
        branch=locked.pk,
        name=checkpoint.checkpoint_name,
        is_auto=checkpoint.is_auto,
        message_count=checkpoint.message_count,
    )
    return checkpoint


def _recount(branch_ids: Iterable[int]) -> None:
    counts = (
        Checkpoint.objects.filter(branch=OuterRef("pk"))
        .order_by()
        .values("branch")
        .annotate(n=Count("id"))
        .values("n")
    )
    Branch.objects.filter(pk__in=list(branch_ids)).update(
        checkpoint_count=Coalesce(Subquery(counts), Value(0))
    )


@transaction.atomic
def checkpoint_delete(*, checkpoint: Checkpoint) -> None:
    """Delete one checkpoint. Messages are untouched; branches forked from it stay."""
    session_id = (
        Checkpoint.objects.filter(pk=checkpoint.pk).values_list("branch__session_id", flat=True)
    ).first()
    if session_id is None:
        raise CheckpointNotFound()
    lock_session(session_id)
    deleted, _ = Checkpoint.objects.filter(pk=checkpoint.pk).delete()
    if not deleted:
        raise CheckpointNotFound()
    _recount([checkpoint.branch_id])
    events.checkpoints_deleted(session=session_id, checkpoints=[checkpoint.pk])


def _snapshot(qs: QuerySet[Checkpoint]) -> list[DeletedCheckpoint]:
    return [
        DeletedCheckpoint(
            id=row["id"],
            name=row["checkpoint_name"],
            branch_id=row["branch_id"],
            message_count=row["message_count"],
            is_auto=row["is_auto"],
        )
        for row in qs.order_by("branch_id", "message_count", "id").values(
            "id", "checkpoint_name", "branch_id", "message_count", "is_auto"
        )
    ]


def _rewind_locked(
    branch: Branch,
    position: int,
    session_state: JSONObject | None,
    files_mark: int | None = None,
    *,
    keep_files: bool = False,
) -> list[DeletedCheckpoint]:
    """Cut `branch` (row locked, session locked) back to `position` messages, and its workspace
    back to `files_mark` (a checkpoint's; without one, to the files as they stood when the
    message at `position` was sent). What goes is rewinds.rewind_cut's: the later messages and
    file versions, and every checkpoint and branch that captured any of them. With
    `keep_files`, no file version goes: the workspace stays as it is (rewinds.versions_keep)."""
    if not branch.fork_position <= position <= branch.message_count:
        raise RewindOutOfRange(
            f"Cannot rewind to message {position}: this branch holds messages "
            f"{branch.fork_position} to {branch.message_count} of its history."
        )
    cut = rewind_cut(branch, position, files_mark=files_mark, keep_files=keep_files)
    deleted = _snapshot(cut.checkpoints())
    doomed = cut.branches
    branches_drop(doomed)
    Message.objects.filter(branch_id=branch.pk, position__gte=position).delete()
    versions_delete(cut.versions())
    if keep_files:
        versions_keep(branch.pk, position)
    cut.own_checkpoints().delete()
    updates: dict[str, Any] = {"message_count": position}
    if session_state is not None:
        updates["session_state"] = session_state
    Branch.objects.filter(pk=branch.pk).update(**updates)
    _recount([branch.pk])
    branch_make_current(branch.session_id, branch.pk)
    branch.refresh_from_db()
    return deleted


def _announce(branch: Branch, checkpoint_id: int | None, deleted: list[DeletedCheckpoint]) -> None:
    """The events of a restore or a rewind: the branch now current, and what it deleted."""
    gone = [d.id for d in deleted]
    events.branch_changed(
        session=branch.session_id,
        branch=branch.pk,
        checkpoint=checkpoint_id,
        deleted_checkpoints=gone,
    )
    events.checkpoints_deleted(session=branch.session_id, checkpoints=gone)


@transaction.atomic
def branch_rewind(*, branch: Branch, position: int) -> list[DeletedCheckpoint]:
    """Cut a branch back to its first `position` messages (which must be its own to cut)."""
    if isinstance(position, bool) or not isinstance(position, int):
        raise InvalidInput("The rewind position must be a whole number.")
    if position < 0:
        raise RewindOutOfRange("Cannot rewind below the start of the conversation.")
    lock_session(branch.session_id)
    try:
        locked = Branch.objects.select_for_update().get(pk=branch.pk)
    except Branch.DoesNotExist:
        raise BranchNotFound() from None
    deleted = _rewind_locked(locked, position, None)
    branch.refresh_from_db()
    _announce(branch, None, deleted)
    return deleted


@transaction.atomic
def checkpoint_restore(
    *,
    checkpoint: Checkpoint,
    mode: str = "branch",
    session: Session | None = None,
    scope: str = "all",
) -> RestoreResult:
    """Restore a checkpoint.

    `branch`: a new current branch whose history is the checkpoint's; nothing is lost.
    `rewind`: the checkpoint's own branch is cut back to it; its later messages and file
    versions go, with every checkpoint and branch that captured any of them (rewinds.rewind_cut),
    and the deleted checkpoints are returned.
    `scope`: `all` restores the conversation and the workspace together; `conversation` the
    messages and session state only, the workspace the session shows now carried over (_carry);
    `files` the workspace only (_restore_files), whatever the mode.
    With `session`, a checkpoint of any other session is reported as not found.
    """
    check_restore_choice(mode, scope)
    try:
        current = Checkpoint.objects.select_related("branch").get(pk=checkpoint.pk)
    except Checkpoint.DoesNotExist:
        raise CheckpointNotFound("That checkpoint no longer exists.") from None
    session_id = current.branch.session_id
    if session is not None and session.pk != session_id:
        raise CheckpointNotFound()
    if scope != "all":
        # It may write files: the owner's row first, as every workspace write takes it.
        lock_owner(session_id)
    lock_session(session_id)
    # Re-read under the lock: a concurrent rewind or delete may have removed it meanwhile. Its
    # row stays locked, so the retention job cannot delete it under the new branch either.
    try:
        current = (
            Checkpoint.objects.select_for_update(of=("self",))
            .select_related("branch")
            .get(pk=checkpoint.pk)
        )
    except Checkpoint.DoesNotExist:
        raise CheckpointNotFound("That checkpoint no longer exists.") from None
    source = current.branch
    was_current = Branch.objects.filter(session_id=session_id, is_current=True).first()
    if scope == "files":
        return _restore_files(current, was_current or source, mode)
    ledger = irreversible_effects(current, mode=mode, current=was_current, scope=scope)
    if mode == "rewind":
        return _restore_rewind(current, was_current, ledger, scope)
    why: JSONObject = {"restored_from": current.pk}
    # The new branch inherits what the restores behind its parent and the branch it leaves
    # left behind (but the calls its own history shows), and adds this restore's.
    kept = _not_in_history(
        left_behind_after(_kept(source), _kept(was_current), effects=ledger),
        source,
        current.message_count,
    )
    if kept:
        why["left_behind"] = kept
    # Conversation only, from the branch shown: the new branch sees its parent's files as they
    # stand (every version so far), so nothing is written.
    same = was_current is None or was_current.pk == source.pk
    new = branch_fork(
        branch=source,
        position=current.message_count,
        forked_from_id=current.pk,
        session_state=current.session_state,
        file_mark=file_mark() if scope == "conversation" and same else current.files_mark,
        metadata=why,
    )
    paths = _carry(current, was_current, new) if scope == "conversation" and not same else []
    return RestoreResult(branch=new, mode=mode, irreversible=ledger, scope=scope, paths=paths)


def _carry(checkpoint: Checkpoint, shown: Branch | None, onto: Branch) -> list[str]:
    """A conversation-only restore keeps the workspace the session shows (`shown`, its current
    branch): when that is another branch than the one the restore goes on from, its files are
    written onto `onto` (a new version of each path that differs, as the user's own write, the
    contents shared): the cost is the files that differ, whatever the history's length."""
    if shown is None or shown.pk == onto.pk:
        return []
    return files_match(
        branch=onto,
        files=workspace_files(shown),
        metadata={"restored_from": checkpoint.pk, "scope": "conversation"},
    )


def _restore_rewind(
    current: Checkpoint, was_current: Branch | None, ledger: list[Message], scope: str
) -> RestoreResult:
    """Cut the checkpoint's branch back to it (checkpoint_restore's `rewind`). Conversation
    only: no file version goes, and the workspace shown before stays (_carry, before the cut,
    which may delete the branch it was read from)."""
    source = current.branch
    keep = scope == "conversation"
    paths = _carry(current, was_current, source) if keep else []
    deleted = _rewind_locked(
        source, current.message_count, current.session_state, current.files_mark, keep_files=keep
    )
    kept = left_behind_after(_kept(source), effects=ledger)
    if kept:
        meta = {**(source.metadata or {}), "left_behind": kept}
        Branch.objects.filter(pk=source.pk).update(metadata=meta)
        source.metadata = meta
    _announce(source, current.pk, deleted)
    return RestoreResult(
        branch=source,
        mode="rewind",
        deleted_checkpoints=deleted,
        irreversible=ledger,
        scope=scope,
        paths=paths,
    )


def _restore_files(current: Checkpoint, onto: Branch, mode: str) -> RestoreResult:
    """Files only: the session's current branch (`onto`) gets the workspace as of the
    checkpoint, a new version of every path that differs (written, or deleted) as the user's
    own write, in one step; its messages, its state and every checkpoint and version stay, in
    either mode (so no rewind cuts anything), and no effect is left behind: the conversation
    that shows them stays."""
    paths = files_match(
        branch=onto,
        files=workspace_files(current.branch, mark=current.files_mark),
        metadata={"restored_from": current.pk, "scope": "files"},
    )
    onto.refresh_from_db()
    return RestoreResult(branch=onto, mode=mode, scope="files", paths=paths)


def checkpoint_cleanup_auto(
    *,
    keep_latest: int,
    older_than: datetime | None = None,
    branch: Branch | None = None,
    session: Session | None = None,
    on_session: Callable[[int, list[int]], None] | None = None,
) -> int:
    """Delete the automatic checkpoints retention may delete (`auto_checkpoints_beyond`: past
    the newest `keep_latest` of each branch, taken before `older_than` when given, never a fork
    point nor a named checkpoint), of one branch, of one session's branches, or of every branch.

    Each session is done in a transaction of its own, under its lock, and chooses again what to
    delete once it holds the lock: a restore that forks from a checkpoint meanwhile keeps it, and
    an overlapping second cleanup finds nothing left to delete. `on_session(session_id, ids)` is
    called after each session's deletions commit. Returns how many were deleted."""
    if isinstance(keep_latest, bool) or not isinstance(keep_latest, int) or keep_latest < 0:
        raise InvalidInput("keep_latest must be a whole number, 0 or more.")
    scope: dict[str, Any] = {"keep_latest": keep_latest, "older_than": older_than}
    if branch is not None:
        scope["branch_id"] = branch.pk
    session_ids = (
        [session.pk]
        if session is not None
        else sorted(
            set(auto_checkpoints_beyond(**scope).values_list("branch__session_id", flat=True))
        )
    )
    total = 0
    for session_id in session_ids:
        gone = _cleanup_session(session_id, scope)
        total += len(gone)
        if on_session is not None and gone:
            on_session(session_id, gone)
    return total


@transaction.atomic
def _cleanup_session(session_id: int, scope: dict[str, Any]) -> list[int]:
    try:
        lock_session(session_id)
    except SessionNotFound:
        return []  # deleted meanwhile, with its checkpoints
    doomed = list(
        auto_checkpoints_beyond(session_id=session_id, **scope).values_list("id", "branch_id")
    )
    if not doomed:
        return []
    ids = [pk for pk, _ in doomed]
    for start in range(0, len(ids), 500):
        Checkpoint.objects.filter(pk__in=ids[start : start + 500]).delete()
    _recount({branch_id for _, branch_id in doomed})
    events.checkpoints_deleted(session=session_id, checkpoints=ids)
    return ids
