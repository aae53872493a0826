"""Writes to a workspace: a file written or deleted is one new version row (a deletion has no
content), its content one blob stored once per session. Nothing is ever updated or copied: a
checkpoint marks the versions so far, a restore reads along the lineage, a rewind deletes the
branch's later versions (checkpoints.rewinds). A rewrite at the same position replaces the
version it follows when no checkpoint or branch needs it (coalescing).

Every write takes its owner's row (accounts.services.lock_user: the per-user quota counts
across their sessions), then the session's lock, then the branch's row
(sessions_app.services.lock_session), in the order every other writer takes them, so it is
ordered with checkpoints, forks and rewinds, and the quotas it checks (workspace.quota) cannot be
passed by two writes at once. A write by a turn's agent names the turn: it is refused once the
turn is no longer that worker's (cancelled, failed, taken over), and dropped with the turn's tool
messages when the turn does not end `done` (checkpoints.captures.turn_writes_drop, called
where sessions_app.turns ends it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from accounts.services import lock_user
from core import events
from core.errors import Conflict
from core.validation import JSONObject, clean_metadata
from sessions_app.errors import BranchNotFound, SessionNotFound
from sessions_app.models import Branch, Session, Turn
from sessions_app.services import lock_session

from . import batch
from .coalescing import previous_version_coalesce, replaced_version
from .errors import FileNotFoundInWorkspace, TooManyFiles
from .file_rows import blobs_collect, versions_delete
from .models import FileVersion, WorkspaceBlob
from .quota import quota_check
from .selectors import WorkspaceFile, workspace_files
from .validation import FileContent, clean_file_content, clean_path, max_files

__all__ = [
    "TurnNoLongerWrites",
    "Written",
    "blobs_collect",
    "file_delete",
    "file_write",
    "files_apply",
    "files_match",
    "lock_owner",
    "versions_delete",
]

WRITING_STATUSES = (Turn.Status.RUNNING, Turn.Status.AWAITING_APPROVAL)


class TurnNoLongerWrites(Conflict):
    def __init__(self) -> None:
        super().__init__(
            "This turn was stopped or taken over: its agent can no longer change the files."
        )


@dataclass(frozen=True)
class Written:
    file: WorkspaceFile
    created: bool  # a new path (else a new version of one that existed)


def _locked_branch(branch: Branch, turn: Turn | None) -> Branch:
    lock_session(branch.session_id)
    locked = Branch.objects.select_for_update().filter(pk=branch.pk).first()
    if locked is None:
        raise BranchNotFound()
    if (
        turn is not None
        and not Turn.objects.filter(
            pk=turn.pk, attempts=turn.attempts, status__in=WRITING_STATUSES
        ).exists()
    ):
        raise TurnNoLongerWrites()
    return locked


def lock_owner(session_id: int) -> int:
    """Lock the session's owner's row (before the session's lock, as every writer does) and
    return their id."""
    owner = Session.objects.filter(pk=session_id).values_list("owner_id", flat=True)
    owner_id = owner.first()
    if owner_id is None:
        raise SessionNotFound()
    lock_user(owner_id)
    return owner_id


def _within_quota(
    locked: Branch, owner_id: int, sha: str, size: int, *, adds_version: bool
) -> WorkspaceBlob | None:
    """The session's blob of that content if it holds one already; QuotaExceeded when one more
    version (unless the write replaces one: coalescing) and, for a new content, its bytes
    would pass a quota."""
    blob = WorkspaceBlob.objects.filter(session_id=locked.session_id, sha256=sha).first()
    new_bytes = 0 if blob is not None else size
    quota_check(
        session_id=locked.session_id,
        owner_id=owner_id,
        versions=int(adds_version),
        new_bytes=new_bytes,
    )
    return blob


def _check_shape(files: list[WorkspaceFile], path: str) -> bool:
    """Whether `path` exists as a file; BadPath-like errors when it would clash with a folder
    (a file where a folder is, or a folder where a file is)."""
    exists = False
    for f in files:
        if f.path == path:
            exists = True
        elif f.path.startswith(path + "/"):
            raise Conflict(f"'{path}' is a folder of this workspace; choose another file name.")
        elif path.startswith(f.path + "/"):
            raise Conflict(f"'{f.path}' is a file, so it cannot hold '{path}'.")
    return exists


@transaction.atomic
def file_write(
    *,
    branch: Branch,
    path: Any,
    content: Any,
    turn: Turn | None = None,
    by: str = "user",
    metadata: JSONObject | None = None,
) -> Written:
    """Write a file of `branch`'s workspace (a new version at the branch's position): text (a
    str, or bytes that are UTF-8 without NUL) or binary (any other bytes). Refused with a clear
    error, writing nothing: a bad path, a file over
    WORKSPACE_MAX_FILE_BYTES, a new file past WORKSPACE_MAX_FILES, a path that clashes with a
    folder, a write over a storage quota (workspace.quota)."""
    clean = clean_path(path)
    stored = clean_file_content(content)
    meta = clean_metadata({**(metadata or {}), "by": by}, what="file metadata")
    owner_id = lock_owner(branch.session_id)
    locked = _locked_branch(branch, turn)
    files = workspace_files(locked)
    written = _write(locked, owner_id, files, clean, stored, turn, meta)
    events.workspace_changed(session=locked.session_id, branch=locked.pk, paths=[clean])
    return written


def _write(
    locked: Branch,
    owner_id: int,
    files: list[WorkspaceFile],
    clean: str,
    stored: FileContent,
    turn: Turn | None,
    meta: JSONObject,
) -> Written:
    """One version of `clean` holding `stored`, on a branch already locked whose files are
    `files` (the checks of file_write, its event aside)."""
    exists = _check_shape(files, clean)
    if not exists and len(files) >= max_files():
        raise TooManyFiles(
            f"This workspace already holds {len(files):,} files, the most it may "
            "(WORKSPACE_MAX_FILES): delete one first. Nothing was written."
        )
    sha, size = stored.sha256, stored.size
    replaces = replaced_version(
        branch_id=locked.pk,
        path=clean,
        position=locked.message_count,
        turn_id=None if turn is None else turn.pk,
    )
    blob = _within_quota(locked, owner_id, sha, size, adds_version=replaces is None)
    if blob is None:
        blob = WorkspaceBlob.objects.create(
            session_id=locked.session_id,
            sha256=sha,
            content=stored.text or "",
            data=stored.raw if stored.binary else None,
            size=size,
        )
    version = _new_version(locked, clean, blob, turn, meta)
    return Written(
        WorkspaceFile(
            clean,
            blob.size,
            blob.sha256,
            version.created_at,
            version.pk,
            blob.pk,
            blob.is_binary,
        ),
        created=not exists,
    )


@transaction.atomic
def files_apply(
    *,
    branch: Branch,
    writes: Mapping[str, str | bytes],
    deletes: list[str],
    turn: Turn | None = None,
    by: str = "user",
    metadata: JSONObject | None = None,
) -> list[str]:
    """Write and delete several files of `branch`'s workspace in one step, all or none (a
    sandboxed command's changes, taken back as its turn's write): the checks of file_write and
    file_delete for each, one `workspace.changed` event for them all. A deletion of a file the
    workspace no longer holds is skipped. Returns the paths changed, sorted."""
    meta = clean_metadata({**(metadata or {}), "by": by}, what="file metadata")
    cleaned = {clean_path(p): clean_file_content(content) for p, content in writes.items()}
    gone = {clean_path(p) for p in deletes} - set(cleaned)
    owner_id = lock_owner(branch.session_id)
    locked = _locked_branch(branch, turn)
    files = {f.path: f for f in workspace_files(locked)}
    gone &= set(files)
    remaining = {p: f for p, f in files.items() if p not in gone}
    batch.check_shapes(remaining, sorted(cleaned))
    changed = sorted({*cleaned, *gone})
    if changed:
        batch.apply(
            locked=locked,
            owner_id=owner_id,
            writes=cleaned,
            deletes=sorted(gone),
            turn=turn,
            meta=meta,
        )
        events.workspace_changed(session=locked.session_id, branch=locked.pk, paths=changed)
    return changed


@transaction.atomic
def files_match(
    *,
    branch: Branch,
    files: Sequence[WorkspaceFile],
    by: str = "user",
    metadata: JSONObject | None = None,
) -> list[str]:
    """Make `branch`'s workspace hold exactly `files` (another workspace of the same session,
    as workspace_files reads it: a checkpoint's, another branch's) in one step: a new version of
    each path that differs, written or deleted, at the branch's position, pointing at the
    content the session holds already (none is read or copied). Nothing else changes; one
    `workspace.changed` event for them all. Returns the paths changed, sorted: the cost is the
    two workspaces' files, whatever the history's length."""
    meta = clean_metadata({**(metadata or {}), "by": by}, what="file metadata")
    owner_id = lock_owner(branch.session_id)
    locked = _locked_branch(branch, None)
    now = {f.path: f for f in workspace_files(locked)}
    wanted = {f.path: f.blob for f in files}
    writes = {p: blob for p, blob in wanted.items() if p not in now or now[p].blob != blob}
    gone = set(now) - set(wanted)
    deletes = sorted(gone)
    batch.check_shapes({p: f for p, f in now.items() if p not in gone}, sorted(writes))
    changed = sorted({*writes, *deletes})
    if changed:
        batch.apply_held(locked=locked, owner_id=owner_id, blobs=writes, deletes=deletes, meta=meta)
        events.workspace_changed(session=locked.session_id, branch=locked.pk, paths=changed)
    return changed


def _new_version(
    locked: Branch, clean: str, blob: WorkspaceBlob | None, turn: Turn | None, meta: JSONObject
) -> FileVersion:
    """A version of `clean` at the branch's position (`blob` None: a deletion), replacing the
    one before it there when nothing needs that one (workspace.coalescing)."""
    version = FileVersion.objects.create(
        branch_id=locked.pk,
        position=locked.message_count,
        path=clean,
        blob=blob,
        turn=turn,
        metadata=meta,
    )
    previous_version_coalesce(version)
    return version


@transaction.atomic
def files_write_all(
    *, branch: Branch, files: Sequence[tuple[str, str | bytes]], by: str = "user"
) -> int:
    """Write several files all or none (an upload): a refusal of any one (past
    WORKSPACE_MAX_FILES, a folder clash) rolls the earlier writes back, and their events are
    never sent. Returns how many were written."""
    for path, content in files:
        file_write(branch=branch, path=path, content=content, by=by)
    return len(files)


@transaction.atomic
def file_delete(
    *,
    branch: Branch,
    path: Any,
    turn: Turn | None = None,
    by: str = "user",
    metadata: JSONObject | None = None,
) -> str:
    """Delete a file of `branch`'s workspace (a version without content). Returns its path;
    FileNotFoundInWorkspace when there is none."""
    clean = clean_path(path)
    meta = clean_metadata({**(metadata or {}), "by": by}, what="file metadata")
    locked = _locked_branch(branch, turn)
    if not any(f.path == clean for f in workspace_files(locked, path=clean)):
        raise FileNotFoundInWorkspace(clean)
    _new_version(locked, clean, None, turn, meta)
    events.workspace_changed(session=locked.session_id, branch=locked.pk, paths=[clean])
    return clean
