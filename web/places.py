"""The conversation around a point of its history: a message (a search hit opened, `?message=`)
or a checkpoint (the panel's "Show in conversation", `?checkpoint=`) in its place, and the pages
after it ("Load later"). The same queries wherever the point sits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkpoints.selectors import checkpoint_place
from sessions_app.models import Branch, Session
from sessions_app.selectors import (
    branch_lineage,
    current_branch,
    message_place,
    parse_pk,
)
from web.chat_state import PAGE, conversation

if TYPE_CHECKING:
    from sessions_app.models import AnyUser

# --- A message in its place (a search hit opened) ---------------------------------------------

AROUND = PAGE // 2  # messages shown after the one looked for (and PAGE - AROUND before it)
MESSAGE_GONE = "That message is not in this conversation any more: here is its latest part."


def conversation_around(user: AnyUser, session: Session, message: object) -> dict[str, Any]:
    """The conversation with message `message` (an id from a query string) in its place: the
    current branch's history around it (with "Load earlier" and "Load later"), its id as
    `target`. A message of another branch gives that branch's id alone, as `elsewhere_branch`
    (the page opens that branch read-only there: web.reading); a deleted or another user's one
    the latest page with a `target_notice` (not told apart). Costs the same wherever the
    message sits: one lookup by id, the lineage, one range of positions."""
    branch = current_branch(session)
    pk = parse_pk(message)
    found = message_place(user, session, pk)
    if found is None:
        return {**conversation(session), "target_notice": MESSAGE_GONE}
    branch_id, position = found
    if position >= dict(branch_lineage(branch)).get(branch_id, 0):
        return {"elsewhere_branch": branch_id}
    return _window_at(session, branch, position, {"target": pk})


def _window_at(
    session: Session, branch: Branch, position: int, target: dict[str, Any]
) -> dict[str, Any]:
    """The conversation shown around `position` of the current branch's history: the latest
    page when it shows that position, else the history up to AROUND after it with "Load
    later"; `target` says what the page looks for there."""
    if position >= branch.message_count - AROUND:  # the latest page shows it
        return {**conversation(session), **target}
    end = position + AROUND
    return {**conversation(session, before=end), **target, "later": end}


def conversation_after(session: Session, after: int) -> dict[str, Any]:
    """The page of the current branch's history from position `after` ("Load later"), with the
    position of the next page as `later` while one is left."""
    branch = current_branch(session)
    after = max(0, min(after, branch.message_count))
    end = min(branch.message_count, after + PAGE)
    context = conversation(session, before=end, after=after)
    context["later"] = end if end < branch.message_count else None
    return context


# --- A checkpoint in its place (the panel's "Show in conversation") -------------------------------

CHECKPOINT_GONE = "That checkpoint is not in this conversation any more: here is its latest part."


def conversation_at_checkpoint(
    user: AnyUser, session: Session, checkpoint: object
) -> dict[str, Any]:
    """The conversation with checkpoint `checkpoint` (an id from a query string) in its place:
    when its marker is in the current branch's history, the history around it (as
    `conversation_around` does for a message), its id as `target_checkpoint`. One on another
    branch gives that branch's id alone, as `elsewhere_branch` (the page opens that branch
    read-only there: web.reading); a deleted or another user's one the latest page with a
    notice (not told apart). The same queries wherever it sits."""
    branch = current_branch(session)
    pk = parse_pk(checkpoint)
    found = checkpoint_place(user, session, pk)
    if found is None:
        return {**conversation(session), "target_notice": CHECKPOINT_GONE}
    branch_id, count = found
    upper = dict(branch_lineage(branch)).get(branch_id)
    if upper is None or count > upper:
        return {"elsewhere_branch": branch_id}
    return _window_at(session, branch, count, {"target_checkpoint": pk})
