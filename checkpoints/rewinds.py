"""What a rewind deletes: one rule, read by the rewind itself and by every preview of it.

A rewind cuts a branch back to a point: `position` messages, and the workspace as of a file mark
(a checkpoint's `files_mark`; for a rewind by position, the files as they stood when the message
at `position` was sent, as an edit's fork sees them: `workspace.selectors.fork_mark`). It
deletes the branch's messages from `position` on and its file versions past the mark, and with
them everything that captured any of those: the branch's checkpoints past `position` or whose
`files_mark` reaches the first deleted version, and the branches forked from it past `position`
or whose `fork_file_mark` reaches that version (with all their descendants, which read through
them). Whatever it keeps shows exactly what it showed before.

Version ids only grow, so "captured a deleted version" is one comparison against the smallest
deleted id, and every read here is one index lookup or range (the branch's versions by id, its
checkpoints by position and by mark, its children): the cost does not grow with the history.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q, QuerySet

from sessions_app.models import Branch
from workspace.models import FileVersion

from .captures import branches_forked_after
from .models import Checkpoint


@dataclass(frozen=True)
class RewindCut:
    """What cutting branch `branch_id` back to `position` messages deletes (rewind_cut)."""

    branch_id: int
    position: int
    # The smallest id of the branch's file versions it deletes (it deletes every one from this
    # id on); None when it deletes no version.
    first_version: int | None
    # The forked branches that inherit anything it deletes, with all their descendants.
    branches: list[int]

    def versions(self) -> QuerySet[FileVersion]:
        """The branch's own file versions it deletes."""
        if self.first_version is None:
            return FileVersion.objects.none()
        return FileVersion.objects.filter(branch_id=self.branch_id, id__gte=self.first_version)

    def own_checkpoints(self) -> QuerySet[Checkpoint]:
        """The branch's checkpoints that captured a message or a file version it deletes."""
        captured = Q(message_count__gt=self.position)
        if self.first_version is not None:
            captured |= Q(files_mark__gte=self.first_version)
        return Checkpoint.objects.filter(captured, branch_id=self.branch_id)

    def checkpoints(self) -> QuerySet[Checkpoint]:
        """Every checkpoint it deletes: the branch's own (own_checkpoints) and those of the
        branches it deletes."""
        own = self.own_checkpoints()
        if not self.branches:
            return own
        return own | Checkpoint.objects.filter(branch_id__in=self.branches)


def rewind_cut(
    branch: Branch, position: int, *, files_mark: int | None = None, keep_files: bool = False
) -> RewindCut:
    """What a rewind of `branch` to `position` messages, and its workspace to `files_mark` (a
    checkpoint's; None: as the files stood when the message at `position` was sent), deletes.
    With `keep_files` (a restore of the conversation only) it deletes no file version: the
    branch's versions written after `position` stay, moved to `position` (versions_keep).
    Two queries: the first version past the mark, and the forks that captured anything."""
    versions = FileVersion.objects.filter(branch_id=branch.pk)
    if keep_files:
        versions = versions.none()
    elif files_mark is None:
        # fork_mark's cut: the versions from the first one written after that message.
        versions = versions.filter(position__gt=position)
    else:
        versions = versions.filter(id__gt=files_mark)
    first = versions.order_by("id").values_list("id", flat=True).first()
    return RewindCut(
        branch_id=branch.pk,
        position=position,
        first_version=first,
        branches=branches_forked_after(branch.pk, position, first_version=first),
    )


def versions_keep(branch_id: int, position: int) -> int:
    """Move the versions of `branch_id` written after message `position` to `position`, after a
    rewind that keeps the files (rewind_cut's `keep_files`): the workspace stays exactly as it
    was (every version keeps its id and content, so no mark shows anything else), and the
    branch's next messages, which take those positions again, find them written before they
    were sent, as an edit's fork (workspace.selectors.fork_mark) and a later rewind read them.
    One update over the (branch, position) index range: what the rewind would otherwise have
    deleted. Returns how many moved."""
    return FileVersion.objects.filter(branch_id=branch_id, position__gt=position).update(
        position=position
    )
