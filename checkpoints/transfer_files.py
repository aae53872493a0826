"""The workspace in a session's export document, and its import (used by checkpoints.transfer).

The document holds `files`: `versions`, every file version of the session in the order written
(`branch`, `path`, `position`, `sha256` or null for a deletion, `created_at`, `by`), and `blobs`,
each content once ({sha256: text}). A mark (a checkpoint's `files_mark`, a branch's
`fork_file_mark`) is a version id of the exporting server; in the document it becomes the number
of the session's versions it covers (`files_upto` of a checkpoint, `fork_files_upto` of a
branch), which import turns back into an id of its own: versions are inserted in the document's
order, so their new ids keep that order, and "the first n" covers the same versions on both
sides. A document from before the workspace has no `files` and still imports.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field

from core.errors import InvalidInput, TooLarge
from core.validation import clean_past_time
from sessions_app.errors import ImportRejected, ImportTooLarge
from sessions_app.models import (
    WORKSPACE_PATH_MAX,
    Checkpoint,
    ExternalSession,
    FileVersion,
    InternalSession,
    WorkspaceBlob,
)
from workspace.validation import clean_content, clean_path, max_files, sha256_of


class FileVersionDoc(BaseModel):
    model_config = ConfigDict(extra="forbid")

    branch: int
    path: str = Field(max_length=WORKSPACE_PATH_MAX)
    position: int = Field(ge=0)
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")  # null: a deletion
    created_at: datetime | None = None
    by: str = Field(default="", max_length=20, pattern=r"^[a-z_]*$")


class FilesDoc(BaseModel):
    model_config = ConfigDict(extra="forbid")

    versions: list[FileVersionDoc] = Field(default_factory=list)
    blobs: dict[str, str] = Field(default_factory=dict)


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


def files_export(session: ExternalSession) -> FilesExport:
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
                sha: text for sha, text in blobs.values_list("sha256", "content") if sha in used
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


def _bad(message: str) -> ImportRejected:
    return ImportRejected(f"Cannot import this document: {message}")


def _check_blobs(files: FilesDoc) -> None:
    used = {v.sha256 for v in files.versions if v.sha256 is not None}
    for sha, content in files.blobs.items():
        where = f"file content {sha[:16]}"
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise _bad(f"{where}: its key must be the content's SHA-256 in lowercase hex.")
        clean_content(content)
        if sha256_of(content) != sha:
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


def _workspace(
    files: FilesDoc, branches: dict[int, BranchPlace], branch: int, upto: int
) -> dict[str, str]:
    """The workspace of `branch` over the first `upto` versions (as the selectors read it)."""
    bounds: dict[int, int] = {}
    at: int | None = branch
    while at is not None and at not in bounds:
        bounds[at] = upto
        place = branches[at]
        if place.fork_files_upto is not None:
            upto = min(upto, place.fork_files_upto)
        at = place.parent
    out: dict[str, str | None] = {}
    for i, v in enumerate(files.versions):
        if i < bounds.get(v.branch, -1):
            out[v.path] = v.sha256
    return {p: sha for p, sha in out.items() if sha is not None}


def _check_workspaces(files: FilesDoc, branches: dict[int, BranchPlace]) -> None:
    if not files.versions:
        return
    limit = max_files()
    for b in branches:
        found = sorted(_workspace(files, branches, b, len(files.versions)))
        if len(found) > limit:
            raise ImportTooLarge(
                f"Cannot import this document: branch {b}'s workspace holds {len(found):,} files; "
                f"the limit is {limit:,} (WORKSPACE_MAX_FILES)."
            )
        present = set(found)
        for path in found:
            parts = path.split("/")
            folder = next(
                (
                    "/".join(parts[:n])
                    for n in range(1, len(parts))
                    if "/".join(parts[:n]) in present
                ),
                None,
            )
            if folder is not None:
                raise _bad(
                    f"in branch {b}'s workspace '{folder}' is a file and the folder of '{path}'."
                )


# --- Writing them ---------------------------------------------------------------------------


def _aware(value: datetime | None) -> datetime | None:
    if value is None or timezone.is_aware(value):
        return value
    return value.replace(tzinfo=UTC)


def files_import(
    *,
    session: ExternalSession,
    files: FilesDoc | None,
    branches: list[tuple[InternalSession, int | None]],
    checkpoints: list[tuple[Checkpoint, int]],
    branch_ids: dict[int, int],
) -> None:
    """Write the checked files of the document into the new `session`: each content once, the
    versions in the document's order, then the marks: each new branch's fork_file_mark and each
    new checkpoint's files_mark from its count of versions (`branches`, `checkpoints`: the new
    rows with their counts)."""
    if files is None or not files.versions:
        return
    now = timezone.now()
    blobs = WorkspaceBlob.objects.bulk_create(
        [
            WorkspaceBlob(
                session=session,
                sha256=sha,
                content=content,
                size=len(content.encode("utf-8")),
                created_at=now,
            )
            for sha, content in files.blobs.items()
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
    InternalSession.objects.bulk_update(forked, ["fork_file_mark"], batch_size=500)
    for c, n in checkpoints:
        c.files_mark = mark(n)
    Checkpoint.objects.bulk_update([c for c, n in checkpoints if n], ["files_mark"], batch_size=500)
