"""A claimed attempt of a turn: the worker holding it (`owned`), and how a turn held by a worker or
queued ends other than `done`, dropping what it wrote to the workspace (`end_dropping_writes`)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from sessions_app.errors import SessionNotFound

from ..hooks import turn_writes_drop
from ..models import Turn
from ..services import lock_session

# A worker's turn is running, or paused while a tool call waits for its owner's approval
# (sessions_app.approvals): either way the worker holds it and beats.
HELD = (Turn.Status.RUNNING, Turn.Status.AWAITING_APPROVAL)


def owned(turn: Turn) -> QuerySet[Turn]:
    """The turn's row while the caller still holds the attempt it claimed."""
    return Turn.objects.filter(pk=turn.pk, status__in=HELD, attempts=turn.attempts)


def end_dropping_writes(turn_id: int, session_id: int, rows: QuerySet[Turn], **values: Any) -> bool:
    """End a turn other than `done` (failed, cancelled) by the conditional update
    `rows.update(**values)`, under the session's lock, and delete its workspace writes in the
    same transaction (its tool messages are not kept either). False when the update matched
    nothing, or the session is gone."""
    return _end(turn_id, session_id, rows, values, drop=True)


def end_keeping_writes(turn_id: int, session_id: int, rows: QuerySet[Turn], **values: Any) -> bool:
    """end_dropping_writes for a stopped turn, whose workspace writes stay: a write that ran is
    the turn's, kept with its tool message (sessions_app.turns.stopped)."""
    return _end(turn_id, session_id, rows, values, drop=False)


def _end(
    turn_id: int, session_id: int, rows: QuerySet[Turn], values: dict[str, Any], *, drop: bool
) -> bool:
    with transaction.atomic():
        try:
            lock_session(session_id)
        except SessionNotFound:
            return False
        if not rows.update(**values):
            return False
        if drop:
            turn_writes_drop(turn_id)
    return True
