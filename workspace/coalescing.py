"""Coalescing: a path written (or deleted) again at the same position of the same branch replaces
its previous version there when nothing needs that version, so 100 rewrites of a file between two
messages keep one version, not 100.

Nothing can tell the previous version from the new one but a mark that lies between them: a
checkpoint's `files_mark` or a fork's `fork_file_mark` at or past the previous version's id (it
shows the previous version; workspace.selectors), or a version of the branch at a later position
written since (a rewind by position, or an edit's fork, would cut between the two). Neither can
a turn's end: a version a turn wrote gives way only to one of the same turn or of a person, so a
turn that fails and loses its writes never takes a person's write with it. With none of those,
deleting the previous version changes what no branch and no checkpoint shows, and the rewind's
cut (checkpoints.rewinds) keeps or deletes the new version exactly as it would have the previous
one. Each check is one index lookup; the writer holds the session's lock, so no checkpoint or
fork comes in between. The checkpoints' table is above this package: `version_needed` asks it
through workspace.hooks, which checkpoints.apps registers.
"""

from __future__ import annotations

from django.db.models import Q

from sessions_app.models import Branch

from .file_rows import blobs_collect
from .hooks import checkpoint_holds
from .models import FileVersion


def version_needed(version_id: int, *, branch_id: int, position: int) -> bool:
    """Whether a checkpoint, a fork or a later position of `branch_id` tells the version
    `version_id` (written at `position`) from a version of its path written after it."""
    if checkpoint_holds(branch_id=branch_id, version_id=version_id):
        return True
    forks = Branch.objects.filter(parent_id=branch_id)
    if forks.filter(Q(fork_file_mark__isnull=True) | Q(fork_file_mark__gte=version_id)).exists():
        return True
    return FileVersion.objects.filter(
        branch_id=branch_id, position__gt=position, id__gt=version_id
    ).exists()


def replaced_version(
    *, branch_id: int, path: str, position: int, turn_id: int | None, before: int | None = None
) -> tuple[int, int | None] | None:
    """The version of `path` (its id and its blob's id) that a new version of it on `branch_id` at
    `position`, by the turn `turn_id` (None: a person), replaces: its newest one (written before
    the version `before`, when given), when it is at the same position and nothing needs it
    (version_needed). None when it stays. Call under the session's lock."""
    same_path = FileVersion.objects.filter(branch_id=branch_id, path=path)
    if before is not None:
        same_path = same_path.filter(id__lt=before)
    previous = same_path.order_by("-id").values("id", "position", "turn_id", "blob_id").first()
    if previous is None or previous["position"] != position:
        return None
    if turn_id is not None and previous["turn_id"] != turn_id:
        return None
    if version_needed(previous["id"], branch_id=branch_id, position=position):
        return None
    return int(previous["id"]), previous["blob_id"]


def previous_version_coalesce(version: FileVersion) -> bool:
    """Delete the version of `version`'s path that `version` (just written) replaces
    (replaced_version), with its content when nothing else uses it. Call under the session's
    lock. Whether it went."""
    previous = replaced_version(
        branch_id=version.branch_id,
        path=version.path,
        position=version.position,
        turn_id=version.turn_id,
        before=version.pk,
    )
    if previous is None:
        return False
    version_id, blob_id = previous
    FileVersion.objects.filter(pk=version_id).delete()
    if blob_id is not None:
        blobs_collect([blob_id])
    return True
