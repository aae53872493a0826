"""Step 1, claim: the turn becomes this worker's (a fencing token: its attempt), and a
heartbeat keeps it so while it runs.

A worker claims a queued turn by id (`claim_queued`); the Python API starts the turn from its
message and claims it at once (`claim_message`). Either way only one runner holds a turn: a
redelivered task, or a turn another worker took over, is not claimed again.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import (
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
    transaction,
)

from core import logs
from sessions_app.models import Turn
from sessions_app.turns import turn_claim, turn_heartbeat, turn_start

from ..services import turns_recover

if TYPE_CHECKING:
    from .surface import TurnAgent

log = logging.getLogger("agents.turn.claim")


class ClaimFailed(Exception):
    """The database failed while the turn was being claimed (a restarted server, a failover, a
    dropped connection): the turn is still queued, untouched, and its task tries again
    (agents.tasks). The broken connection was dropped (`claim_queued`), so the next try opens a
    new one."""


def claim_queued(turn_id: int) -> Turn | None:
    """A worker's claim of a queued turn. None when it was not queued (a redelivered task, a
    turn another worker took over, a deleted session): the reason is logged. ClaimFailed when
    the database failed during the claim: nothing changed, try again."""
    try:
        turn = turn_claim(turn_id=turn_id, worker=f"{socket.gethostname()}:{os.getpid()}")
    except (OperationalError, InterfaceError) as exc:
        log.warning("turn %s not claimed: the database failed (%s)", turn_id, exc)
        # A broken connection goes, so the next try opens a new one (a first claim runs
        # outside a transaction, whose end would have dropped it).
        connection.close_if_unusable_or_obsolete()
        raise ClaimFailed(str(exc)) from exc
    if turn is None:
        state = Turn.objects.filter(pk=turn_id).values_list("status", flat=True).first()
        log.info("turn %s not run: %s", turn_id, f"it is {state}" if state else "it is gone")
    return turn


def claim_message(agent: TurnAgent, message: str) -> tuple[Turn, bool]:
    """The Python API's claim: the session's stale turns recovered, the user's message stored
    as a new turn on the agent's branch, and claimed here. (turn, False) when a worker took it
    meanwhile (cannot happen unless it was enqueued)."""
    turns_recover(session=agent.external_session)
    queued = turn_start(
        session=agent.external_session, message=message, branch=agent.internal_session
    )
    turn = turn_claim(turn_id=queued.pk)
    if turn is None:
        return Turn.objects.get(pk=queued.pk), False
    return turn, True


class Heartbeat:
    """Touches the turn's heartbeat every TURN_HEARTBEAT_SECONDS on a thread of its own, so a
    slow model (minutes between tokens) never looks like a dead worker, and notes when the turn
    stopped being this worker's (`lost`), so the run stops early. Between beats it looks every
    TURN_STOP_POLL_SECONDS whether the turn was cancelled (`cancelled`, which also makes it
    `lost`): the run then closes the model's stream.

    A turn run inside the caller's open transaction (the Python API called from a transaction,
    the tests) cannot be seen by another connection: there the run beats inline instead."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.lost = False
        self.cancelled = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._inline = transaction.get_connection().in_atomic_block
        self._last = time.monotonic()

    def __enter__(self) -> Heartbeat:
        if not self._inline:
            self._thread = threading.Thread(
                target=logs.in_this_context(self._run),
                name=f"turn-{self.turn.pk}-heartbeat",
                daemon=True,
            )
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _beat(self) -> None:
        if not turn_heartbeat(turn=self.turn):
            self.check_cancelled()
            self.lost = True

    def check_cancelled(self) -> None:
        """Note whether the turn was cancelled (then it is no longer this worker's either)."""
        # exists() reads one row and closes its cursor: an open one would keep SQLite locked.
        if Turn.objects.filter(pk=self.turn.pk, status=Turn.Status.CANCELLED).exists():
            self.cancelled = self.lost = True

    def _run(self) -> None:
        interval = settings.TURN_HEARTBEAT_SECONDS
        poll = min(interval, settings.TURN_STOP_POLL_SECONDS)
        try:
            while not self.lost and not self._stop.wait(poll):
                try:
                    if time.monotonic() - self._last >= interval:
                        self._last = time.monotonic()
                        self._beat()
                    else:
                        self.check_cancelled()
                except Exception:  # the database is away for a moment: try again next beat
                    log.warning("turn %s: heartbeat failed", self.turn.pk, exc_info=True)
                finally:
                    close_old_connections()
        finally:
            connection.close()

    def tick(self) -> None:
        """Called by the run on each model event: beats when running inline."""
        if self._inline and time.monotonic() - self._last > settings.TURN_HEARTBEAT_SECONDS:
            self._beat()
            self._last = time.monotonic()
