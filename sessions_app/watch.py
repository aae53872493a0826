"""What a socket watching a session reads back from the database, so that it never depends on
the channel layer (best-effort: it drops messages past its capacity) for what a reader must not
miss: the running turn, a turn's progress (one indexed query, asked about once a second while
the turn runs), and a turn's end, rebuilt as the event the worker sent (web/ws/consumers.py).
Reads only."""

from __future__ import annotations

from dataclasses import dataclass

from core.events import Event, TurnCancelled, TurnFailed, TurnFinished

from .models import Turn
from .turns import HELD


@dataclass(frozen=True)
class Progress:
    """A turn's state, as one query reads it: its status, its attempt (a take-over counts one
    more, and numbers its pieces from 1 again) and its branch."""

    status: str
    attempt: int
    branch: int | None

    @property
    def ended(self) -> bool:
        return self.status not in Turn.ACTIVE


def running_turn(session_id: int) -> tuple[int, int] | None:
    """The running turn of the session and its attempt, if a turn runs (one query)."""
    found = (
        Turn.objects.filter(session_id=session_id, status__in=HELD)
        .order_by("-created_at")
        .values_list("pk", "attempts")
        .first()
    )
    return (found[0], found[1]) if found is not None else None


def turn_progress(*, session_id: int, turn_id: int) -> Progress | None:
    """The turn's progress (one query by primary key), None when the session has no such turn
    (deleted with its session)."""
    found = (
        Turn.objects.filter(pk=turn_id, session_id=session_id)
        .values_list("status", "attempts", "branch_id")
        .first()
    )
    if found is None:
        return None
    return Progress(status=found[0], attempt=found[1], branch=found[2])


def turn_end_event(*, session_id: int, turn_id: int) -> Event | None:
    """The event that ended the turn (`turn.finished`, `turn.failed` or `turn.cancelled`), as
    core.events sent it, read from the database; None while the turn has not ended."""
    turn = (
        Turn.objects.filter(pk=turn_id, session_id=session_id)
        .select_related("reply_message")
        .first()
    )
    if turn is None or turn.is_active:
        return None
    if turn.status == Turn.Status.DONE:
        finished: TurnFinished = {
            "type": "turn.finished",
            "session": session_id,
            "turn": turn_id,
            "status": "done",
            "finish_reason": turn.finish_reason,
            "reply": turn.reply,
            "tools_used": [str(tool) for tool in turn.tools_used or ()],
            "checkpoint": turn.checkpoint_id,
            "rolled_back_to": turn.rolled_back_to_id,
        }
        return finished
    if turn.status == Turn.Status.FAILED:
        failed: TurnFailed = {
            "type": "turn.failed",
            "session": session_id,
            "turn": turn_id,
            "error": turn.error,
        }
        return failed
    cancelled: TurnCancelled = {"type": "turn.cancelled", "session": session_id, "turn": turn_id}
    return cancelled
