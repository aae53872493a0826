"""The workspace in a session's export document, and its import (used by checkpoints.transfer).

The document holds `files`: `versions`, every file version of the session in the order written
(`branch`, `path`, `position`, `sha256` or null for a deletion, `created_at`, `by`), and `blobs`,
each content once, by the SHA-256 of its bytes: a text file's as a string, a binary file's as
`{"base64": "..."}`. A mark (a checkpoint's `files_mark`, a branch's
`fork_file_mark`) is a version id of the exporting server; in the document it becomes the number
of the session's versions it covers (`files_upto` of a checkpoint, `fork_files_upto` of a
branch), which import turns back into an id of its own: versions are inserted in the document's
order, so their new ids keep that order, and "the first n" covers the same versions on both
sides. A document from before the workspace has no `files` and still imports.

Paths are taken in NFC, as every path of a workspace is: a document from a server that stored
another form (NFD, as macOS names files) has those paths renamed as the migration renamed this
server's own (workspace.nfc.nfc_renames: the NFC form, or "café (2).md" beside a real twin).
The new session's versions and contents count towards its owner's storage quotas
(workspace.quota): a document over one is refused as too large, writing nothing.
"""

from __future__ import annotations

import base64
import binascii
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field

from core.errors import InvalidInput, TooLarge
from core.validation import clean_past_time
from sessions_app.errors import ImportRejected, ImportTooLarge
from sessions_app.models import Branch, Session
from workspace.models import WORKSPACE_PATH_MAX, FileVersion, WorkspaceBlob
from workspace.nfc import nfc_renames
from workspace.quota import QuotaExceeded, quota_check
from workspace.validation import (
    FileContent,
    clean_content,
    clean_file_content,
    clean_path,
    max_files,
)

from .models import Checkpoint


class FileVersionDoc(BaseModel):
    model_config = ConfigDict(extra="forbid")

    branch: int
    path: str = Field(max_length=WORKSPACE_PATH_MAX)
    position: int = Field(ge=0)
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")  # null: a deletion
    created_at: datetime | None = None
    by: str = Field(default="", max_length=20, pattern=r"^[a-z_]*$")


class BinaryDoc(BaseModel):
    """A binary file's content in the document: its bytes in base64."""

    model_config = ConfigDict(extra="forbid")

    base64: str


class FilesDoc(BaseModel):
    model_config = ConfigDict(extra="forbid")

    versions: list[FileVersionDoc] = Field(default_factory=list)
    blobs: dict[str, str | BinaryDoc] = Field(default_factory=dict)


def blob_content(value: str | BinaryDoc) -> FileContent:
    """A document's content as stored: a string is text; `{"base64"}` bytes, text or binary as
    they are (InvalidInput: not base64, NUL in a text, over WORKSPACE_MAX_FILE_BYTES)."""
    if isinstance(value, str):
        return clean_file_content(clean_content(value))
    try:
        raw = base64.b64decode(value.base64, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("a binary content must be its bytes in base64.") from None
    return clean_file_content(raw)


def _blob_doc(text: str, data: bytes | memoryview | None) -> str | dict[str, str]:
    if data is None:
        return text
    return {"base64": base64.b64encode(bytes(data)).decode("ascii")}


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class FilesExport:
    """The session's files for the document, and how to write a mark in it."""

    files: dict[str, Any]
    ids: list[int]  # the session's version ids, in order

    def upto(self, mark: int | None) -> int | None:
        """A mark as the number of the session's versions it covers (None stays None)."""
        return None if mark is None else bisect_right(self.ids, mark)


def files_export(session: Session) -> FilesExport:
    """The session's file versions in the order written and the contents they use, once each."""
    rows = list(
        FileVersion.objects.filter(branch__session=session)
        .order_by("id")
        .values_list(
            "id", "branch_id", "path", "position", "blob__sha256", "created_at", "metadata"
        )
    )
    used = {row[4] for row in rows if row[4] is not None}
    blobs = WorkspaceBlob.objects.filter(session=session).order_by("sha256")
    versions = [
        {
            "branch": branch,
            "path": path,
            "position": position,
            "sha256": sha,
            "created_at": _iso(created),
            "by": str((meta or {}).get("by", "")),
        }
        for _, branch, path, position, sha, created, meta in rows
    ]
    return FilesExport(
        files={
            "versions": versions,
            "blobs": {
                sha: _blob_doc(text, data)
                for sha, text, data in blobs.values_list("sha256", "content", "data")
                if sha in used
            },
        },
        ids=[row[0] for row in rows],
    )


# --- Checking a document's files ------------------------------------------------------------


@dataclass(frozen=True)
class BranchPlace:
    """What the files' check needs of a branch of the document."""

    parent: int | None
    fork_position: int
    length: int  # its history's length: fork_position + its own messages
    fork_files_upto: int | None


def files_check(
    files: FilesDoc | None, branches: dict[int, BranchPlace], checkpoints: dict[int, int]
) -> None:
    """Everything about the document's files, before anything is written: each content is text
    within the size limit whose SHA-256 is its key; each version names a branch of the document,
    a clean path, a position inside that branch and a known content (or none); each mark
    (`checkpoints`: a checkpoint's id -> its files_upto) lies within the versions; each branch's
    workspace, as it stands, holds at most WORKSPACE_MAX_FILES files and no file where a folder
    is. ImportRejected (ImportTooLarge) says what is wrong."""
    files = files or FilesDoc()
    _paths_to_nfc(files)
    try:
        _check_blobs(files)
        _check_versions(files, branches)
        _check_marks(files, branches, checkpoints)
        _check_workspaces(files, branches)
    except ImportRejected:
        raise
    except TooLarge as exc:
        raise ImportTooLarge(f"Cannot import this document: {exc.message}") from None
    except InvalidInput as exc:
        raise _bad(exc.message) from None


def _paths_to_nfc(files: FilesDoc) -> None:
    """Each version's path not in NFC renamed in place (module docstring)."""
    renames = nfc_renames(v.path for v in files.versions)
    for v in files.versions:
        v.path = renames.get(v.path, v.path)


def _bad(message: str) -> ImportRejected:
    return ImportRejected(f"Cannot import this document: {message}")


def _check_blobs(files: FilesDoc) -> None:
    used = {v.sha256 for v in files.versions if v.sha256 is not None}
    for sha, content in files.blobs.items():
        where = f"file content {sha[:16]}"
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise _bad(f"{where}: its key must be the content's SHA-256 in lowercase hex.")
        if blob_content(content).sha256 != sha:
            raise _bad(f"{where}: the content's SHA-256 does not match its key.")
        if sha not in used:
            raise _bad(f"{where} is used by no file version.")


def _check_versions(files: FilesDoc, branches: dict[int, BranchPlace]) -> None:
    for i, v in enumerate(files.versions):
        where = f"file version {i} ({v.path[:80]!r})"
        place = branches.get(v.branch)
        if place is None:
            raise _bad(f"{where} names branch {v.branch}, which is not in the document.")
        if clean_path(v.path) != v.path:
            raise _bad(f"{where}: the path is not in its plain form ({clean_path(v.path)!r}).")
        if not place.fork_position <= v.position <= place.length:
            raise _bad(
                f"{where} is at message {v.position}, outside branch {v.branch}'s messages "
                f"{place.fork_position} to {place.length}."
            )
        if v.sha256 is not None and v.sha256 not in files.blobs:
            raise _bad(f"{where} names content {v.sha256[:16]}, which is not in blobs.")
        if v.created_at is not None:
            clean_past_time(v.created_at, what=f"created_at of {where}")


def _check_marks(
    files: FilesDoc, branches: dict[int, BranchPlace], checkpoints: dict[int, int]
) -> None:
    total = len(files.versions)
    marks: list[tuple[str, int | None]] = [
        (f"checkpoint {c}'s files_upto", n) for c, n in checkpoints.items()
    ]
    marks += [(f"branch {b}'s fork_files_upto", p.fork_files_upto) for b, p in branches.items()]
    for what, n in marks:
        if n is not None and not 0 <= n <= total:
            raise _bad(f"{what} is {n}; the document has {total} file versions.")


State = dict[str, tuple[int, str | None]]  # path -> (the version's index, its content or None)


class _Workspaces:
    """Each branch's workspace as the selectors would read it (the newest version of each path
    along the lineage, each ancestor capped by its child's fork mark), built from its parent's
    at the fork and its own versions, each state once: the cost follows the document's size,
    not its branches times its versions."""

    def __init__(self, files: FilesDoc, branches: dict[int, BranchPlace]) -> None:
        self.branches = branches
        self.own: dict[int, list[tuple[int, str, str | None]]] = {b: [] for b in branches}
        for i, v in enumerate(files.versions):
            self.own[v.branch].append((i, v.path, v.sha256))
        self.memo: dict[tuple[int, int], State] = {}

    def state(self, branch: int, upto: int) -> State:
        chain: list[tuple[int, int]] = []
        at: int | None = branch
        while at is not None and (at, upto) not in self.memo:
            chain.append((at, upto))
            place = self.branches[at]
            if place.fork_files_upto is not None:
                upto = min(upto, place.fork_files_upto)
            at = place.parent
        out: State = self.memo[(at, upto)] if at is not None else {}
        if len(self.memo) > 256:  # a bound on the memory; only the speed depends on it
            self.memo.clear()
        for b, bound in reversed(chain):
            out = dict(out)
            for i, path, sha in self.own[b]:
                if i >= bound:
                    break
                if path not in out or out[path][0] < i:
                    out[path] = (i, sha)
            self.memo[(b, bound)] = out
        return out


def _check_workspaces(files: FilesDoc, branches: dict[int, BranchPlace]) -> None:
    if not files.versions:
        return
    limit = max_files()
    workspaces = _Workspaces(files, branches)
    for b in branches:
        state = workspaces.state(b, len(files.versions))
        found = sorted(p for p, (_, sha) in state.items() if sha is not None)
        if len(found) > limit:
            raise ImportTooLarge(
                f"Cannot import this document: branch {b}'s workspace holds {len(found):,} files; "
                f"the limit is {limit:,} (WORKSPACE_MAX_FILES)."
            )
        own = {path for _, path, _ in workspaces.own[b]}
        _check_no_file_holds_files(b, found, [p for p in found if p in own])


def _check_no_file_holds_files(branch: int, found: list[str], written: list[str]) -> None:
    """No file of the branch's own writes (`written`) is a folder of another file, nor inside a
    folder that is a file (`found`: the workspace's paths, sorted)."""
    present = set(found)
    for path in written:
        parts = path.split("/")
        for n in range(1, len(parts)):
            folder = "/".join(parts[:n])
            if folder in present:
                raise _bad(
                    f"in branch {branch}'s workspace '{folder}' is a file and the folder of "
                    f"'{path}'."
                )
        at = bisect_left(found, path + "/")
        if at < len(found) and found[at].startswith(path + "/"):
            raise _bad(
                f"in branch {branch}'s workspace '{path}' is a file and the folder of "
                f"'{found[at]}'."
            )


# --- Writing them ---------------------------------------------------------------------------


def _aware(value: datetime | None) -> datetime | None:
    if value is None or timezone.is_aware(value):
        return value
    return value.replace(tzinfo=UTC)


def files_import(
    *,
    session: Session,
    files: FilesDoc | None,
    branches: list[tuple[Branch, int | None]],
    checkpoints: list[tuple[Checkpoint, int]],
    branch_ids: dict[int, int],
) -> None:
    """Write the checked files of the document into the new `session` (its owner's row locked:
    sessions_app.services.session_quota_check), within its owner's storage quotas: each
    content once, the versions in the document's order, then the marks: each new branch's
    fork_file_mark and each new checkpoint's files_mark from its count of versions
    (`branches`, `checkpoints`: the new rows with their counts)."""
    if files is None or not files.versions:
        return
    try:
        quota_check(
            session_id=session.pk,
            owner_id=session.owner_id,
            versions=len(files.versions),
            new_bytes=sum(blob_content(content).size for content in files.blobs.values()),
        )
    except QuotaExceeded as exc:
        raise ImportTooLarge(f"Cannot import this document: {exc.message}") from None
    now = timezone.now()
    contents = {sha: blob_content(value) for sha, value in files.blobs.items()}
    blobs = WorkspaceBlob.objects.bulk_create(
        [
            WorkspaceBlob(
                session=session,
                sha256=sha,
                content=content.text or "",
                data=content.raw if content.binary else None,
                size=content.size,
                created_at=now,
            )
            for sha, content in contents.items()
        ],
        batch_size=500,
    )
    blob_ids = {b.sha256: b.pk for b in blobs}
    made = FileVersion.objects.bulk_create(
        [
            FileVersion(
                branch_id=branch_ids[v.branch],
                position=v.position,
                path=v.path,
                blob_id=blob_ids[v.sha256] if v.sha256 is not None else None,
                created_at=_aware(v.created_at) or now,
                metadata={"by": v.by} if v.by else {},
            )
            for v in files.versions
        ],
        batch_size=1000,
    )
    ids = [v.pk for v in made]

    def mark(n: int) -> int:
        return ids[n - 1] if n else 0

    forked = [b for b, n in branches if n is not None]
    for b, n in branches:
        if n is not None:
            b.fork_file_mark = mark(n)
    Branch.objects.bulk_update(forked, ["fork_file_mark"], batch_size=100)
    for c, n in checkpoints:
        c.files_mark = mark(n)
    Checkpoint.objects.bulk_update([c for c, n in checkpoints if n], ["files_mark"], batch_size=100)
