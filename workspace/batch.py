"""Many writes and deletions of one branch's workspace as one step, in statements per batch of
rows, never per file (workspace.services.files_apply: a sandboxed command's changes taken
back): the same checks and the same coalescing as a write at a time (workspace.services,
workspace.coalescing), the quotas checked once for the whole, the contents and versions
inserted in bulk.

Call under the owner's row, the session's lock and the branch's row (workspace.services).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from core.errors import Conflict
from core.validation import JSONObject
from sessions_app.models import Branch, Turn

from .coalescing import version_needed
from .errors import TooManyFiles
from .file_rows import CHUNK, blobs_collect
from .models import FileVersion, WorkspaceBlob
from .quota import quota_check
from .selectors import WorkspaceFile
from .validation import FileContent, max_files


@dataclass(frozen=True)
class Previous:
    id: int
    blob_id: int | None


def check_shapes(files: dict[str, WorkspaceFile], writes: Iterable[str]) -> None:
    """A write where a folder is, or under a file, is refused (as file_write refuses it); a new
    file past WORKSPACE_MAX_FILES too."""
    folders = {p.rsplit("/", i)[0] for p in files for i in range(1, p.count("/") + 1)}
    new = 0
    for path in writes:
        if path in folders:
            raise Conflict(f"'{path}' is a folder of this workspace; choose another file name.")
        parts = path.split("/")
        for i in range(1, len(parts)):
            above = "/".join(parts[:i])
            if above in files:
                raise Conflict(f"'{above}' is a file, so it cannot hold '{path}'.")
        if path not in files:
            new += 1
    if new and len(files) + new > max_files():
        raise TooManyFiles(
            f"This workspace holds {len(files):,} files and this would add {new:,}; it may "
            f"hold at most {max_files():,} (WORKSPACE_MAX_FILES). Nothing was written."
        )


def replaced_versions(locked: Branch, paths: list[str], turn: Turn | None) -> dict[str, Previous]:
    """The versions the new versions of `paths` replace (workspace.coalescing.replaced_version,
    for many paths: one query for their newest versions, then the same rule for each)."""
    newest: dict[str, Any] = {}
    for start in range(0, len(paths), CHUNK):
        rows = (
            FileVersion.objects.filter(branch_id=locked.pk, path__in=paths[start : start + CHUNK])
            .order_by("path", "-id")
            .values("path", "id", "position", "turn_id", "blob_id")
        )
        for row in rows:
            newest.setdefault(str(row["path"]), row)
    turn_id = None if turn is None else turn.pk
    candidates = {
        path: row
        for path, row in newest.items()
        if row["position"] == locked.message_count
        and (turn_id is None or row["turn_id"] == turn_id)
    }
    free = _not_needed(locked, sorted(int(row["id"]) for row in candidates.values()))
    return {
        path: Previous(int(row["id"]), None if row["blob_id"] is None else int(row["blob_id"]))
        for path, row in candidates.items()
        if int(row["id"]) in free
    }


def _not_needed(locked: Branch, ids: list[int]) -> set[int]:
    """Those of the version ids `ids` (sorted) that nothing needs (coalescing.version_needed).
    Whether a version is needed only grows as its id falls (a checkpoint's or a fork's mark at or
    past it, a later position's version written after it), so the needed ones are the first of
    `ids`: found by bisection, a few checks for any number of versions."""
    low, high = 0, len(ids)  # ids[:low] are needed, ids[high:] are not
    while low < high:
        middle = (low + high) // 2
        if version_needed(ids[middle], branch_id=locked.pk, position=locked.message_count):
            low = middle + 1
        else:
            high = middle
    return set(ids[low:])


def apply(
    *,
    locked: Branch,
    owner_id: int,
    writes: dict[str, FileContent],
    deletes: list[str],
    turn: Turn | None,
    meta: JSONObject,
) -> None:
    """Store `writes` (path: content) and `deletes` (paths the workspace holds) as new versions at
    the branch's position, replacing the versions coalescing lets go."""
    paths = sorted({*writes, *deletes})
    replaced = replaced_versions(locked, paths, turn)
    shas = {path: content.sha256 for path, content in writes.items()}
    held = _blobs(locked.session_id, set(shas.values()))
    new_contents = {sha: writes[p] for p, sha in shas.items() if sha not in held}
    quota_check(
        session_id=locked.session_id,
        owner_id=owner_id,
        versions=len(paths) - len(replaced),
        new_bytes=sum(content.size for content in new_contents.values()),
    )
    created = WorkspaceBlob.objects.bulk_create(
        [
            WorkspaceBlob(
                session_id=locked.session_id,
                sha256=sha,
                content=content.text or "",
                data=content.raw if content.binary else None,
                size=content.size,
            )
            for sha, content in sorted(new_contents.items())
        ]
    )
    held.update({blob.sha256: blob.pk for blob in created})
    _versions_store(
        locked, {path: held[sha] for path, sha in shas.items()}, paths, turn, meta, replaced
    )


def apply_held(
    *, locked: Branch, owner_id: int, blobs: dict[str, int], deletes: list[str], meta: JSONObject
) -> None:
    """Store, as a person's write, new versions of `blobs` (path: the id of a content the
    session holds already: another point's workspace, a checkpoint's) and `deletes` (paths the
    workspace holds), at the branch's position: no content is read or copied, and the version
    quota is checked once for the whole."""
    paths = sorted({*blobs, *deletes})
    replaced = replaced_versions(locked, paths, None)
    quota_check(
        session_id=locked.session_id,
        owner_id=owner_id,
        versions=len(paths) - len(replaced),
        new_bytes=0,
    )
    _versions_store(locked, blobs, paths, None, meta, replaced)


def _versions_store(
    locked: Branch,
    blobs: dict[str, int],
    paths: list[str],
    turn: Turn | None,
    meta: JSONObject,
    replaced: dict[str, Previous],
) -> None:
    """One version of each of `paths` (its content `blobs[path]`; a deletion when absent), in
    bulk, then the versions they replace deleted (with the contents nothing uses any more)."""
    FileVersion.objects.bulk_create(
        [
            FileVersion(
                branch_id=locked.pk,
                position=locked.message_count,
                path=path,
                blob_id=blobs.get(path),
                turn=turn,
                metadata=meta,
            )
            for path in paths
        ]
    )
    if replaced:
        ids = [p.id for p in replaced.values()]
        for start in range(0, len(ids), CHUNK):
            FileVersion.objects.filter(pk__in=ids[start : start + CHUNK]).delete()
        blobs_collect(p.blob_id for p in replaced.values() if p.blob_id is not None)


def _blobs(session_id: int, shas: set[str]) -> dict[str, int]:
    """The session's contents among `shas`, by SHA-256: their ids."""
    found: dict[str, int] = {}
    ordered = sorted(shas)
    for start in range(0, len(ordered), CHUNK):
        rows = WorkspaceBlob.objects.filter(
            session_id=session_id, sha256__in=ordered[start : start + CHUNK]
        ).values_list("sha256", "pk")
        found.update({sha: int(pk) for sha, pk in rows})
    return found
