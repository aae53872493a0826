"""Deleting a workspace's rows: file versions, and the contents no version uses any more.

workspace.services, coalescing and checkpoints (a rewind, checkpoints.captures: a failed, stopped
or retaken turn loses its writes with its messages) use the same functions.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Exists, OuterRef, QuerySet

from core import events

from .models import FileVersion, WorkspaceBlob

CHUNK = 500  # ids per statement: far below every database's limit on parameters


def blobs_collect(blob_ids: Iterable[int]) -> int:
    """Delete those of `blob_ids` no version refers to any more (after versions were deleted:
    a rewind, a failed turn). Returns how many went."""
    ids = sorted(set(blob_ids))
    gone = 0
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        used = FileVersion.objects.filter(blob=OuterRef("pk"))
        gone += (
            WorkspaceBlob.objects.filter(pk__in=chunk)
            .exclude(Exists(used))
            .delete()[1]
            .get(WorkspaceBlob._meta.label, 0)
        )
    return gone


def versions_delete(versions: QuerySet[FileVersion]) -> list[str]:
    """Delete the FileVersion rows of the queryset `versions`, and the blobs only they used.
    Returns the paths they touched."""
    return sorted({p for paths in _versions_delete(versions).values() for p in paths})


def _versions_delete(versions: QuerySet[FileVersion]) -> dict[tuple[int, int], set[str]]:
    """The deletion itself; returns the paths touched per (session, branch)."""
    rows = list(versions.values_list("id", "path", "blob_id", "branch_id", "branch__session_id"))
    touched: dict[tuple[int, int], set[str]] = {}
    for _, path, _, branch, session in rows:
        touched.setdefault((session, branch), set()).add(path)
    ids = [row[0] for row in rows]
    for start in range(0, len(ids), CHUNK):
        FileVersion.objects.filter(pk__in=ids[start : start + CHUNK]).delete()
    blobs_collect(row[2] for row in rows if row[2] is not None)
    return touched


def turn_versions_delete(turn_id: int) -> list[str]:
    """Delete what a turn's agent wrote to the workspace (its versions, and the contents only
    they used), and say so with `workspace.changed` per branch after commit. Call it through
    checkpoints.captures.turn_writes_drop, which first drops what captured them. Returns the paths
    touched."""
    touched = _versions_delete(FileVersion.objects.filter(turn_id=turn_id))
    for (session, branch), paths in sorted(touched.items()):
        events.workspace_changed(session=session, branch=branch, paths=paths)
    return sorted({p for paths in touched.values() for p in paths})
