"""The versions of a message: what the "< 1/2 >" switcher on a message moves between.

An edit, a regeneration, a restore or a rollback makes a branch that forks at a position `p` and
holds its own message there. Every branch whose history below `p` is the same shares that
prefix, and each one that holds its own message at `p` holds one version of it. Histories form a
tree, so the prefix below `p` of a branch is named by its "root at p": walking up from the branch
while it inherits everything below `p` from its parent (its fork position is `p` or more). Two
branches have the same history below `p` exactly when they have the same root at `p`.

Everything is computed from the session's branches in memory (one query, made by the caller),
and only at positions where some branch forks with messages of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .models import Branch, Message


@dataclass(frozen=True)
class Versions:
    index: int  # 1-based: the version shown
    total: int
    previous: int | None  # the branch to make current to show the version before, if any
    next: int | None  # ... and the one after

    @property
    def label(self) -> str:
        return f"{self.index}/{self.total}"


class _Tree:
    def __init__(self, branches: Iterable[Branch]) -> None:
        self.by_id = {b.pk: b for b in branches}
        self.order = sorted(self.by_id.values(), key=lambda b: (b.created_at, b.pk))

    def root_at(self, branch: Branch, position: int) -> int:
        """The highest branch with the same history below `position`."""
        while branch.parent_id in self.by_id and branch.fork_position >= position:
            branch = self.by_id[branch.parent_id]
        return branch.pk

    def owner_at(self, branch: Branch, position: int) -> int | None:
        """The branch holding the message at `position` of `branch`'s history, if it has one."""
        if position >= branch.message_count:
            return None
        while branch.fork_position > position and branch.parent_id in self.by_id:
            branch = self.by_id[branch.parent_id]
        return branch.pk

    @staticmethod
    def owns(branch: Branch, position: int) -> bool:
        return branch.fork_position <= position < branch.message_count


def message_versions(
    branches: Iterable[Branch], history: Sequence[Message], *, current: int
) -> dict[int, Versions]:
    """For the messages of `history` (a slice of the current branch's history, oldest first) that
    have other versions: the message that shows the switcher (by id) and its versions. The
    switcher sits on the user message at the fork point, or on the reply after it when every
    other version there was made by regenerating the reply. Switching to a version makes current
    the newest branch that shows it (the current one when it does)."""
    tree = _Tree(branches)
    forks = {
        b.fork_position
        for b in tree.order
        if b.parent_id is not None and tree.owns(b, b.fork_position)
    }
    found: dict[int, Versions] = {}
    for i, message in enumerate(history):
        p = message.position
        owner = tree.by_id.get(message.branch_id)
        if p not in forks or owner is None:
            continue
        root = tree.root_at(owner, p)
        versions = [b for b in tree.order if tree.owns(b, p) and tree.root_at(b, p) == root]
        if len(versions) < 2:
            continue
        holders: dict[int, int] = {}  # version (owner) -> the branch to show it on
        for b in tree.order:  # oldest first: the newest holder wins
            held = tree.owner_at(b, p)
            if held is not None and tree.root_at(b, p) == root:
                holders[held] = b.pk
        at = next(n for n, b in enumerate(versions) if b.pk == owner.pk)
        holders[owner.pk] = current
        shown_on = [holders.get(b.pk, b.pk) for b in versions]

        anchor = message
        forked = [b for b in versions if b.parent_id is not None and b.fork_position == p]
        if forked and all("regenerated" in (b.metadata or {}) for b in forked):
            anchor = _reply_after(history, i) or message
        found[anchor.pk] = Versions(
            index=at + 1,
            total=len(versions),
            previous=shown_on[at - 1] if at > 0 else None,
            next=shown_on[at + 1] if at + 1 < len(shown_on) else None,
        )
    return found


def _reply_after(history: Sequence[Message], i: int) -> Message | None:
    """The first reply with text after the user message at `i`, before the next user message."""
    for message in history[i + 1 :]:
        if message.role == Message.Role.USER:
            return None
        if message.role == Message.Role.ASSISTANT and message.content:
            return message
    return None
