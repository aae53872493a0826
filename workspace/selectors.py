"""Reads of a workspace: a branch's files as they stand, or as of a checkpoint, in one query.

A branch's workspace is the newest version of each path along its lineage: its own versions,
then its parent's up to the mark the branch was forked at (`Branch.fork_file_mark`),
and so on up, each bound capped by the one below it. A checkpoint's workspace is the same read
bounded by its `files_mark`. Version ids only grow (SQLite's AUTOINCREMENT, PostgreSQL's
identity), so a mark taken once keeps meaning the same set of versions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Max

from sessions_app.models import Branch

from .errors import BinaryFile, FileNotFoundInWorkspace
from .models import FileVersion, WorkspaceBlob
from .validation import FileContent, clean_path

# Past any version id: "everything so far" (a BIGINT on both databases).
UNBOUNDED = 2**62


def file_mark() -> int:
    """The workspace mark of "every file version written so far": the newest version's id (0:
    none yet), one index lookup. A checkpoint keeps it (`Checkpoint.files_mark`); see
    this module's docstring for how a mark bounds a workspace."""
    return int(FileVersion.objects.aggregate(m=Max("id"))["m"] or 0)


def fork_mark(branch: Branch, position: int) -> int:
    """The mark a branch forked from `branch` at message `position` without a checkpoint (an
    edit, a regeneration) sees: every version written on `branch` at a position at most
    `position` (before the message at `position` was answered), none written later."""
    later = (
        FileVersion.objects.filter(branch=branch, position__gt=position)
        .order_by("id")
        .values_list("id", flat=True)
        .first()
    )
    return file_mark() if later is None else later - 1


@dataclass(frozen=True)
class WorkspaceFile:
    """One file of a workspace as of a point."""

    path: str
    size: int
    sha256: str
    updated_at: datetime
    version: int  # the FileVersion's id
    blob: int
    binary: bool = False  # bytes that are not UTF-8 text (an image, a PDF)


def _sql(with_prefix: bool) -> str:
    q = connection.ops.quote_name
    branches = q(Branch._meta.db_table)
    versions = q(FileVersion._meta.db_table)
    blobs = q(WorkspaceBlob._meta.db_table)
    prefix = "AND (v.path = %s OR v.path LIKE %s ESCAPE '!')" if with_prefix else ""
    return f"""
        WITH RECURSIVE lineage(id, parent_id, fork_mark, upper) AS (
            SELECT id, parent_id, fork_file_mark, CAST(%s AS BIGINT)
            FROM {branches} WHERE id = %s
            UNION ALL
            SELECT p.id, p.parent_id, p.fork_file_mark,
                   CASE WHEN COALESCE(l.fork_mark, l.upper) < l.upper
                        THEN COALESCE(l.fork_mark, l.upper) ELSE l.upper END
            FROM {branches} p JOIN lineage l ON p.id = l.parent_id
        ),
        newest AS (
            SELECT v.id, v.path, v.blob_id, v.created_at,
                   ROW_NUMBER() OVER (PARTITION BY v.path ORDER BY v.id DESC) AS rn
            FROM {versions} v JOIN lineage l ON v.branch_id = l.id
            WHERE v.id <= l.upper {prefix}
        )
        SELECT n.path, b.size, b.sha256, n.created_at, n.id, b.id,
               CASE WHEN b.data IS NULL THEN 0 ELSE 1 END
        FROM newest n JOIN {blobs} b ON b.id = n.blob_id
        WHERE n.rn = 1
        ORDER BY n.path
    """  # noqa: S608 - quoted names and constants; values are parameters


def _like_prefix(path: str) -> str:
    escaped = path.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return f"{escaped}/%"


def workspace_files(
    branch: Branch, *, mark: int | None = None, path: str | None = None
) -> list[WorkspaceFile]:
    """The branch's files (as of `mark`, else as they stand), sorted by path; with `path`, only
    that file or the files under that folder. One query, whatever the lineage's depth."""
    bound = UNBOUNDED if mark is None else int(mark)
    params: list[Any] = [bound, branch.pk]
    if path:
        params += [path, _like_prefix(path)]
    created = FileVersion._meta.get_field("created_at")
    converters = connection.ops.get_db_converters(created.get_col(FileVersion._meta.db_table))
    with connection.cursor() as cursor:
        cursor.execute(_sql(bool(path)), params)
        rows = cursor.fetchall()
    out = []
    for p, size, sha, when, version, blob, binary in rows:
        for converter in converters:
            when = converter(when, created, connection)
        out.append(WorkspaceFile(p, int(size), sha, when, int(version), int(blob), bool(binary)))
    return out


def workspace_file(
    branch: Branch, path: Any, *, mark: int | None = None
) -> tuple[WorkspaceFile, str]:
    """One text file and its content (FileNotFoundInWorkspace when the branch has none there;
    BinaryFile when it is not text: workspace_file_bytes reads any file)."""
    found, content = workspace_file_bytes(branch, path, mark=mark)
    if content.text is None:
        raise BinaryFile(found.path, found.size)
    return found, content.text


def workspace_file_bytes(
    branch: Branch, path: Any, *, mark: int | None = None
) -> tuple[WorkspaceFile, FileContent]:
    """One file and its content, text or binary (FileNotFoundInWorkspace when there is none)."""
    clean = clean_path(path)
    found = [f for f in workspace_files(branch, mark=mark, path=clean) if f.path == clean]
    if not found:
        raise FileNotFoundInWorkspace(clean)
    return found[0], blob_contents([found[0].blob])[found[0].blob]


def blob_contents(blob_ids: list[int]) -> dict[int, FileContent]:
    """The contents of the blobs `blob_ids`, by id: one query (none for no ids), whatever their
    number (a workspace's files, or two workspaces' in a comparison)."""
    if not blob_ids:
        return {}
    rows = WorkspaceBlob.objects.filter(pk__in=blob_ids).values_list("pk", "content", "data")
    return {
        int(pk): FileContent(None, bytes(data))
        if data is not None
        else FileContent(text, text.encode("utf-8"))
        for pk, text, data in rows
    }


@dataclass(frozen=True)
class Entry:
    """One entry of a folder's listing: a file, or a folder holding files."""

    name: str
    path: str
    is_dir: bool
    size: int  # a file's bytes; a folder's file count


def directory(files: list[WorkspaceFile], folder: str) -> list[Entry]:
    """The entries right under `folder` ("" the root), folders first, then files, by name."""
    prefix = f"{folder}/" if folder else ""
    folders: dict[str, int] = {}
    entries: list[Entry] = []
    for f in files:
        if not f.path.startswith(prefix):
            continue
        rest = f.path[len(prefix) :]
        head, sep, _ = rest.partition("/")
        if sep:
            folders[head] = folders.get(head, 0) + 1
        else:
            entries.append(Entry(head, f.path, False, f.size))
    dirs = [Entry(name, f"{prefix}{name}", True, n) for name, n in sorted(folders.items())]
    return dirs + sorted(entries, key=lambda e: e.name)


@dataclass(frozen=True)
class FilesChange:
    """What going from one workspace to another changes, by path."""

    added: list[str]
    removed: list[str]
    changed: list[str]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


def files_change(before: list[WorkspaceFile], after: list[WorkspaceFile]) -> FilesChange:
    old = {f.path: f.sha256 for f in before}
    new = {f.path: f.sha256 for f in after}
    return FilesChange(
        added=sorted(set(new) - set(old)),
        removed=sorted(set(old) - set(new)),
        changed=sorted(p for p in set(old) & set(new) if old[p] != new[p]),
    )
