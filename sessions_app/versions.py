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
    have other versions: the message that shows the switcher (by id) and its versions.

    At a fork point two switchers may show, as in ChatGPT: the user message's moves between its
    edits, and the reply's (the first reply with text after it) between the replies that
    regenerating gave that edit. A version made by regenerating belongs to the edit whose reply
    it answers again: that of the branch it was made from, at any depth of edits and
    regenerations. Switching to a version makes current the newest branch that shows it (the
    current one when it does)."""
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
        at = _Fork(tree, owner, p, current)
        edits, replies = at.edits(), at.replies()
        if edits is not None:
            found[message.pk] = edits
        if replies is not None:
            reply = _reply_after(history, i)
            if reply is not None:
                found[reply.pk] = replies
            elif edits is None:  # no reply shown (not yet, or its turn failed): on the question
                found[message.pk] = replies
    return found


class _Fork:
    """The versions at position `p` of the histories that share `owner`'s history below `p`:
    each branch holding its own message there is one, grouped by the edit it shows."""

    def __init__(self, tree: _Tree, owner: Branch, p: int, current: int) -> None:
        self.tree, self.owner, self.p = tree, owner, p
        root = tree.root_at(owner, p)
        self.versions = [b for b in tree.order if tree.owns(b, p) and tree.root_at(b, p) == root]
        ids = {b.pk for b in self.versions}
        self.edit_of: dict[int, int] = {}  # version -> the version whose user message it shows
        for b in self.versions:
            self._edit(b, ids)
        # The branch to show each version and each edit on: the newest showing it (oldest first,
        # so the newest wins), the current one for what it shows.
        self.holders: dict[int, int] = {}
        self.edit_holders: dict[int, int] = {}
        for b in tree.order:
            held = tree.owner_at(b, p)
            if held in ids and tree.root_at(b, p) == root:
                self.holders[held] = b.pk
                self.edit_holders[self.edit_of[held]] = b.pk
        self.holders[owner.pk] = current
        self.edit_holders[self.edit_of[owner.pk]] = current

    def _edit(self, branch: Branch, ids: set[int]) -> int:
        """The version whose user message `branch` shows: the branch it regenerated the reply
        of, when it was made by regenerating (that one's edit, and so on up), else its own."""
        if branch.pk in self.edit_of:
            return self.edit_of[branch.pk]
        edit = branch.pk
        parent = self.tree.by_id.get(branch.parent_id) if branch.parent_id is not None else None
        if (
            parent is not None
            and branch.fork_position == self.p
            and "regenerated" in (branch.metadata or {})
        ):
            source = self.tree.owner_at(parent, self.p)
            if source in ids:  # else it no longer holds that message (a rewind cut it)
                edit = self._edit(self.tree.by_id[source], ids)
        self.edit_of[branch.pk] = edit
        return edit

    def edits(self) -> Versions | None:
        """The user message's switcher: one version per edit."""
        edits = list(dict.fromkeys(self.edit_of[b.pk] for b in self.versions))
        return _switcher(edits, self.edit_of[self.owner.pk], self.edit_holders)

    def replies(self) -> Versions | None:
        """The reply's switcher: one version per reply to the edit shown."""
        shown = self.edit_of[self.owner.pk]
        replies = [b.pk for b in self.versions if self.edit_of[b.pk] == shown]
        return _switcher(replies, self.owner.pk, self.holders)


def _switcher(versions: list[int], shown: int, holders: dict[int, int]) -> Versions | None:
    if len(versions) < 2:
        return None
    at = versions.index(shown)
    return Versions(
        index=at + 1,
        total=len(versions),
        previous=holders[versions[at - 1]] if at > 0 else None,
        next=holders[versions[at + 1]] if at + 1 < len(versions) else None,
    )


def _reply_after(history: Sequence[Message], i: int) -> Message | None:
    """The first reply with text after the user message at `i`, before the next user message."""
    for message in history[i + 1 :]:
        if message.role == Message.Role.USER:
            return None
        if message.role == Message.Role.ASSISTANT and message.content:
            return message
    return None
