"""What the chat page shows, built once for the views and the WebSocket consumer alike, so a
message looks the same whether it arrived with the page or over the stream."""

from __future__ import annotations

import copy
import json
import time
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.context import context_usage
from agents.tools import SHELL_TOOLS
from checkpoints.models import Checkpoint
from checkpoints.selectors import (
    checkpoints_page,
    session_checkpoints,
    window_checkpoints,
)
from core.errors import InvalidInput
from governance.selectors import admin_notices
from sessions_app.approvals import may_have_run_note
from sessions_app.labels import branch_labels
from sessions_app.models import Branch, Message, Session, Turn
from sessions_app.reply_stream import stream_snapshot
from sessions_app.selectors import (
    active_turn,
    branch_history,
    current_branch,
    last_turn,
    session_branches_with_forks,
)
from sessions_app.turns import continued_reply, is_cut_off, without_cut_note
from sessions_app.versions import message_versions
from usage.selectors import conversation_usage

if TYPE_CHECKING:
    pass

PAGE = 100
CHECKPOINT_PAGE = 20  # checkpoints listed at first, and added by each "Show older"
CHECKPOINTS_MAX_SHOWN = 500  # the most a live update re-lists (what the reader had loaded)
CHECKPOINT_KINDS = ("all", "manual", "auto")
CHECKPOINT_SCOPES = ("all", "branch")


@dataclass
class BranchNode:
    branch: Branch
    label: str
    children: list[BranchNode] = field(default_factory=list)


@dataclass(frozen=True)
class Branches:
    """What every part of the page reads about the session's branches, read once: the current
    branch, all of them (with the checkpoints they were restored from) and their labels."""

    current: Branch
    all: list[Branch]
    labels: dict[int, str]

    @classmethod
    def of(cls, session: Session) -> Branches:
        branches = session_branches_with_forks(session)
        return cls(current_branch(session), branches, branch_labels(branches))


def composer_state(session: Session) -> dict[str, Any]:
    """What the composer's buttons need (Send waits and Stop shows while a turn runs): one query,
    without the conversation."""
    active = active_turn(session)
    return {"session": session, "active_turn": active, "busy": active is not None}


def conversation(
    session: Session,
    *,
    before: int | None = None,
    after: int | None = None,
    known: Branches | None = None,
) -> dict[str, Any]:
    """The current branch's last messages (or the page before position `before`, from position
    `after` when given), the running turn with its reply so far, the checkpoints' markers among
    those messages, and the last turn's failure when it can be retried. `known`: the branches
    when the caller has read them already."""
    known = known or Branches.of(session)
    branch = known.current
    end = branch.message_count if before is None else max(0, min(before, branch.message_count))
    start = max(0, end - PAGE) if after is None else max(0, min(after, end))
    shown = branch_history(branch, start=start, end=end)
    branches, labels = known.all, known.labels
    active = active_turn(session)
    last = None
    notice = None
    if before is None and active is None:
        last = last_turn(session)
        notice = rollback_notice(last, branch, labels)
        if last is not None and not (
            last.status == Turn.Status.FAILED and last.branch_id == branch.pk
        ):
            last = None
    ending = shown[-1] if shown and before is None and active is None else None
    history = joined_replies(shown)
    markers_top, markers = checkpoint_markers(branch, history, start=start, end=end)
    runs = run_points(history, markers_top, markers)
    # A turn continuing the last reply streams into that reply's bubble: shown with it.
    continued = None
    if active is not None and before is None and history and continued_reply(active) is not None:
        continued = copy.copy(history.pop())
        continued.content = without_cut_note(continued.content)
    partial = (
        stream_snapshot(turn_id=active.pk, attempt=active.attempts)
        if active is not None and before is None
        else None
    )
    return {
        "session": session,
        "branch": branch,
        # The branch's last reply, when it was cut off: its bubble gets a Continue button.
        "continuable": ending.pk if ending is not None and is_cut_off(ending) else None,
        "continuable_shown": history[-1].pk if ending is not None and history else None,
        "continued": continued,
        "branch_label": labels.get(branch.pk, ""),
        "versions": message_versions(branches, shown, current=branch.pk),
        "rollback_notice": notice,
        "context": context_usage(branch),
        # What the conversation's model calls used so far, and those on this branch (one query).
        "spend": conversation_usage(session, branch.pk),
        "history": history,
        "markers_top": markers_top,
        "markers": markers,
        "run_points": runs,
        "earlier": start if start > 0 else None,
        "active_turn": active if before is None else None,
        "partial": partial,
        # A continued reply's bubble: its text so far, the reply's then the stream's.
        "continued_text": (
            continued.content + (partial.text if partial is not None else "")
            if continued is not None
            else ""
        ),
        "failed_turn": last,
        "busy": active is not None,
        "approval": approval_card(active) if before is None else None,
        # What an administrator did here that the owner has not dismissed (governance).
        "admin_notices": admin_notices(session) if before is None else [],
    }


def checkpoint_markers(
    branch: Branch, history: list[Message], *, start: int, end: int
) -> tuple[list[Checkpoint], dict[int, list[Checkpoint]]]:
    """Where the checkpoints of the shown messages (positions `start` to `end - 1`) sit: those
    before the first message (a checkpoint of 0 messages), and those after each message, by
    the message's id (a checkpoint of n messages follows the message at position n - 1, or the
    reply that message was joined into). Two queries, whatever the history's length."""
    positions = [m.position for m in history]
    top: list[Checkpoint] = []
    after: dict[int, list[Checkpoint]] = {}
    for cp in window_checkpoints(branch, start=start, end=end):
        index = bisect_right(positions, cp.message_count - 1) - 1
        if index < 0:
            top.append(cp)
        else:
            after.setdefault(history[index].pk, []).append(cp)
    return top, after


def run_points(
    history: list[Message], top: list[Checkpoint], markers: dict[int, list[Checkpoint]]
) -> dict[int, tuple[int, int]]:
    """For each sandboxed run shown (a run_shell or run_tests tool message), the checkpoints on
    either side of it among those shown: the last one before it and the first one after it (the
    automatic checkpoint of its turn, as a rule), by the message's id; its terminal block links
    to their comparison. None of the shown checkpoints on a side: no entry. No query."""
    points: dict[int, tuple[int, int]] = {}
    before = top[-1].pk if top else None
    waiting: list[int] = []  # runs since the last checkpoint, waiting for the next one
    for m in history:
        if m.role == Message.Role.TOOL and m.tool_name in SHELL_TOOLS and before is not None:
            waiting.append(m.pk)
        here = markers.get(m.pk)
        if here:
            if before is not None:
                points.update(dict.fromkeys(waiting, (before, here[0].pk)))
            waiting = []
            before = here[-1].pk
    return points


def approval_card(turn: Turn | None) -> dict[str, str] | None:
    """The tool call `turn` waits for, as the approval card shows it (its arguments as indented
    JSON text), or None when it waits for none."""
    pending = turn.pending_approval if turn is not None else None
    if turn is None or turn.status != Turn.Status.AWAITING_APPROVAL:
        return None
    if not isinstance(pending, dict):
        return None
    return card_of(pending, may_have_run_note(pending))


def card_of(call: Mapping[str, Any], note: str | None) -> dict[str, str]:
    """The card of one call that waits (a turn's `pending_approval`, or the event that asks):
    its id, and its place and attempt, which the buttons send back (ids repeat), and the note
    when the call may already have run."""
    return {
        "tool_call_id": str(call.get("tool_call_id", "")),
        "tool_name": str(call.get("tool_name", "")),
        "args_json": json.dumps(call.get("args"), indent=2, ensure_ascii=False, default=str),
        "call": str(call.get("call") or ""),
        "attempt": str(call.get("attempt") or ""),
        "note": note or "",
    }


def joined_replies(shown: list[Message]) -> list[Message]:
    """The messages as the page shows them: a reply extended by Continue (its continuation is
    an assistant message marked "continues") is one message, its texts joined without the
    cut-off note, with the last part's finish (cut off again, stopped) and the first part's id
    and time. Copies: the stored rows are never changed."""
    out: list[Message] = []
    for m in shown:
        metadata = m.metadata if isinstance(m.metadata, dict) else {}
        before = out[-1] if out else None
        if (
            "continues" in metadata
            and m.role == Message.Role.ASSISTANT
            and before is not None
            and before.role == Message.Role.ASSISTANT
            and not before.tool_calls
        ):
            joined = copy.copy(before)
            joined.content = without_cut_note(before.content) + m.content
            kept = {k: v for k, v in before.metadata.items() if k in ("model", "demo")}
            joined.metadata = {**metadata, **kept}
            out[-1] = joined
            continue
        out.append(m)
    return out


def rollback_notice(
    turn: Turn | None, branch: Branch, labels: dict[int, str]
) -> dict[str, Any] | None:
    """When the last turn ended with the agent rolling back and the page still shows the branch
    that rollback made: the checkpoint, the branch and what the rollback could not undo (the
    external effects it left behind), for the page's notice."""
    if turn is None or turn.status != Turn.Status.DONE or turn.rolled_back_to is None:
        return None
    metadata = turn.metadata if isinstance(turn.metadata, dict) else {}
    if metadata.get("rollback_branch") != branch.pk:
        return None
    meta = branch.metadata if isinstance(branch.metadata, dict) else {}
    left = meta.get("left_behind")
    return {
        "checkpoint": turn.rolled_back_to.checkpoint_name,
        "branch": labels[branch.pk],
        "left_behind": [e for e in left if isinstance(e, dict)] if isinstance(left, list) else [],
    }


def branch_tree(known: Branches) -> list[BranchNode]:
    branches, labels = known.all, known.labels
    nodes = {}
    for b in branches:
        nodes[b.pk] = BranchNode(branch=b, label=labels[b.pk])
    roots = []
    for b in branches:
        node = nodes[b.pk]
        if b.parent_id in nodes:
            nodes[b.parent_id].children.append(node)
        else:
            roots.append(node)
    return roots


@dataclass(frozen=True)
class CheckpointFilter:
    """Which checkpoints the panel lists: every kind or one (manual, auto), of every branch or
    of the current branch's line (its own and those it inherits)."""

    kind: str = "all"
    scope: str = "all"

    @classmethod
    def parse(cls, data: Any) -> CheckpointFilter:
        kind = data.get("kind") or "all"
        scope = data.get("scope") or "all"
        if kind not in CHECKPOINT_KINDS:
            raise InvalidInput("Show manual, automatic or all checkpoints (kind).")
        if scope not in CHECKPOINT_SCOPES:
            raise InvalidInput("Show the checkpoints of this branch or of all branches (scope).")
        return cls(kind=kind, scope=scope)

    @property
    def is_default(self) -> bool:
        return self == CheckpointFilter()


def checkpoint_page(
    session: Session,
    *,
    chosen: CheckpointFilter | None = None,
    before: int | None = None,
    count: int = CHECKPOINT_PAGE,
    shown: int = 0,
    current: Branch | None = None,
) -> dict[str, Any]:
    """One page of the panel's checkpoints, newest first: the first `count` that match the
    filter, or those older than checkpoint `before`. `shown` is how many the list held before
    this page (so a live update can list as many again). `current`: the current branch, when
    the caller has read it already."""
    chosen = chosen or CheckpointFilter()
    current = current or current_branch(session)
    count = max(1, min(count, CHECKPOINTS_MAX_SHOWN))
    page, older = checkpoints_page(
        session, current=current, kind=chosen.kind, scope=chosen.scope, before=before, count=count
    )
    return {
        "session": session,
        "current": current,
        "cp_filter": chosen,
        "checkpoints": page,
        "older": older,
        "shown": shown + len(page),
        "total": session_checkpoints(session).count(),
    }


def panel(
    session: Session,
    *,
    known: Branches | None = None,
    chosen: CheckpointFilter | None = None,
    shown: int = 0,
) -> dict[str, Any]:
    """The side panel: the branch tree and the newest checkpoints that match the filter (as
    many as `shown`, a page at least: what the reader had loaded)."""
    known = known or Branches.of(session)
    count = max(shown, CHECKPOINT_PAGE)
    page = checkpoint_page(session, chosen=chosen, count=count, current=known.current)
    return {**page, "tree": branch_tree(known)}


def state_stamp() -> int:
    """Now, in microseconds: when a rendering of the chat's state began its reads."""
    return time.time_ns() // 1000


def page_state(
    session: Session, *, chosen: CheckpointFilter | None = None, shown: int = 0
) -> dict[str, Any]:
    """Everything of the chat page that depends on the current branch (the conversation, its
    header and composer, the side panel), each part computed once: what a page load shows
    and what a refresh brings (sessions_app/_refresh.html). `state_at`: when its reads began
    (microseconds), so that the page never swaps an older rendering over a newer one
    (static/rollback/swaps.js): an action's answer that comes back after the refresh of a
    change that followed it (a turn's start) is not shown."""
    state_at = state_stamp()
    known = Branches.of(session)
    return {
        "state_at": state_at,
        **conversation(session, known=known),
        **panel(session, known=known, chosen=chosen, shown=shown),
    }


def checkpoint_for_panel(checkpoint: Checkpoint) -> dict[str, Any]:
    return {"cp": checkpoint, "session": checkpoint.branch.session}
