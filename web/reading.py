"""A branch read in place, without switching to it (`chat:branch_read`): a search hit, a
checkpoint or a compared point on another branch than the current one opens there. Its history
a page at a time (around the message or checkpoint looked for, with links to the pages before
and after), its checkpoints' markers, and nothing that acts on it: the current branch stays
what it is, for this tab and every other, until the reader presses "Continue here".

The same queries wherever the point sits: one lookup by id, the lineage, one range of
positions, the markers of that range."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkpoints.errors import CheckpointNotFound
from checkpoints.selectors import checkpoint_place
from core.errors import NotFound
from sessions_app.errors import MessageNotFound
from sessions_app.labels import branch_labels
from sessions_app.selectors import (
    branch_history,
    branch_lineage,
    message_place,
    parse_pk,
    session_branches_with_forks,
)
from web.chat_state import PAGE, checkpoint_markers, joined_replies
from web.places import AROUND

if TYPE_CHECKING:
    from sessions_app.models import AnyUser, Branch, Session


def page_position(raw: str | None) -> int | None:
    """`?before=` or `?after=` as a position: None when absent; digits only (at most 12),
    else NotFound (no such page of the branch)."""
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 12):
        raise NotFound("No such page of this branch.")
    return int(raw)


def _in_history(branch: Branch, found: tuple[int, int] | None, *, inclusive: bool) -> bool:
    """Whether a point (its branch's id and position, None when there is none) lies in
    `branch`'s history: below the bound of its branch in the lineage (or at it, for a
    checkpoint, whose marker may end that part)."""
    if found is None:
        return False
    owner, position = found
    upper = dict(branch_lineage(branch)).get(owner)
    if upper is None:
        return False
    return position <= upper if inclusive else position < upper


def target_position(
    user: AnyUser, session: Session, branch: Branch, *, message: str | None, checkpoint: str | None
) -> tuple[int | None, dict[str, int]]:
    """Where the page looks (a position of the history, or None: the latest page) and what it
    marks there (`target` or `target_checkpoint`). A message or checkpoint that is missing,
    another user's, another session's or not in this branch's history: NotFound."""
    if message is not None:
        found = message_place(user, session, message)
        if found is None or not _in_history(branch, found, inclusive=False):
            raise MessageNotFound("That message is not on this branch.")
        return found[1], {"target": parse_pk(message) or 0}
    if checkpoint is not None:
        found = checkpoint_place(user, session, checkpoint)
        if found is None or not _in_history(branch, found, inclusive=True):
            raise CheckpointNotFound("That checkpoint is not on this branch.")
        return found[1], {"target_checkpoint": parse_pk(checkpoint) or 0}
    return None, {}


def page_range(
    count: int, *, at: int | None = None, before: int | None = None, after: int | None = None
) -> tuple[int, int]:
    """The positions shown (start, end) of a history of `count` messages: around position `at`
    (as the chat page shows a search hit: the latest page when it shows it, else up to AROUND
    after it), the page before `before`, the page from `after`, or the latest page."""
    if at is not None:
        end = count if at >= count - AROUND else at + AROUND
        return max(0, end - PAGE), end
    if after is not None:
        start = min(after, count)
        return start, min(count, start + PAGE)
    end = count if before is None else min(before, count)
    return max(0, end - PAGE), end


def branch_reading(
    user: AnyUser,
    session: Session,
    branch: Branch,
    *,
    message: str | None = None,
    checkpoint: str | None = None,
    before: int | None = None,
    after: int | None = None,
) -> dict[str, Any]:
    """What the read view of `branch` shows: its label, the page of its history around the
    point looked for (or the page named by `before` / `after`, else the latest), the markers
    among those messages, and the positions of the pages before and after it (`earlier`,
    `later`, None at either end)."""
    at, target = target_position(user, session, branch, message=message, checkpoint=checkpoint)
    start, end = page_range(branch.message_count, at=at, before=before, after=after)
    history = joined_replies(branch_history(branch, start=start, end=end))
    markers_top, markers = checkpoint_markers(branch, history, start=start, end=end)
    labels = branch_labels(session_branches_with_forks(session))
    return {
        "read_session": session,
        "read_branch": branch,
        "read_label": labels.get(branch.pk, "another branch"),
        "history": history,
        "markers_top": markers_top,
        "markers": markers,
        "earlier": start if start > 0 else None,
        "later": end if end < branch.message_count else None,
        **target,
    }
