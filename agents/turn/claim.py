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
    connection,
    transaction,
)
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from core.db import quoted_column, quoted_table
from memories.models import Memory
from sessions_app.models import Session, Turn
from sessions_app.turns import (
    turn_claim,
    turn_heartbeat,
    turn_start,
    turns_cancelled,
    turns_heartbeat,
)

from ..mcp.models import McpServer
from ..mcp.services import mcp_servers_ensure
from ..services import turns_recover

if TYPE_CHECKING:
    from .surface import TurnAgent

log = logging.getLogger("agents.turn.claim")


class ClaimFailed(Exception):
    """The database failed while the turn was being claimed (a restarted server, a failover, a
    dropped connection): the turn is still queued, untouched, and its task tries again
    (agents.tasks). The broken connection was dropped (`claim_queued`), so the next try opens a
    new one."""


# What a worker's claim also looks up, in its one read of the turn (`claim_looks`): whether the
# owner has any memory, whether any MCP server is enabled at all. A turn whose claim found none
# asks no query for them (`claim_may_find`): most turns, which had one query each.
OWNER_HAS_MEMORIES = "owner_has_memories"
MCP_SERVERS_ENABLED = "mcp_servers_enabled"


def claim_looks() -> dict[str, RawSQL]:
    """The looks as SQL on the turn's own row (Django's `Exists` over a join took the claim's
    read about 0.8 ms to compile; this, 0.1 ms)."""
    col = quoted_column
    turns, sessions = quoted_table(Turn), quoted_table(Session)
    memories, servers = quoted_table(Memory), quoted_table(McpServer)
    owner, user = col(Session, "owner"), col(Memory, "user")
    # Quoted names only; the one value is bound.
    has_memories = (
        f"EXISTS(SELECT 1 FROM {memories} m JOIN {sessions} s ON m.{user} = s.{owner} "  # noqa: S608
        f"WHERE s.{col(Session, 'id')} = {turns}.{col(Turn, 'session')})"
    )
    enabled = f"EXISTS(SELECT 1 FROM {servers} WHERE {col(McpServer, 'enabled')} = %s)"  # noqa: S608
    return {
        OWNER_HAS_MEMORIES: RawSQL(has_memories, [], output_field=BooleanField()),  # noqa: S611
        MCP_SERVERS_ENABLED: RawSQL(enabled, [True], output_field=BooleanField()),  # noqa: S611
    }


def claim_may_find(turn: Turn, look: str) -> bool:
    """False when the claim that returned `turn` found none of what `look` names; True when it
    found some, or did not look (the Python API's claim, a test's turn)."""
    return getattr(turn, look, True) is not False


def claim_queued(turn_id: int) -> Turn | None:
    """A worker's claim of a queued turn. None when it was not queued (a redelivered task, a
    turn another worker took over, a deleted session): the reason is logged. ClaimFailed when
    the database failed during the claim: nothing changed, try again."""
    mcp_servers_ensure()  # AGENT_MCP_SERVERS in their rows before the claim looks for any
    try:
        turn = turn_claim(
            turn_id=turn_id,
            worker=f"{socket.gethostname()}:{os.getpid()}",
            looks=claim_looks(),
        )
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
    """Keeps the turn this worker's while it runs: its heartbeat touched every
    TURN_HEARTBEAT_SECONDS, so a slow model (minutes between tokens) never looks like a dead
    worker, and `lost` set when the turn stopped being this worker's, so the run stops early.
    Between beats it looks every TURN_STOP_POLL_SECONDS whether the turn was cancelled
    (`cancelled`, which also makes it `lost`): the run then closes the model's stream.

    The beats and the looks of every turn the process runs are done together, by one thread
    (`rollback-heartbeats`, see `_Beats`): a look for Stop is one query for all of them, a beat
    one statement for those due. (A thread per turn made a worker of 50 turns run 100 queries a
    second for Stop alone, and its turns queue for the pool's connections behind them.)

    A turn run inside the caller's open transaction (the Python API called from a transaction,
    the tests) cannot be seen by another connection: there the run beats inline instead."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.lost = False
        self.cancelled = False
        self._inline = transaction.get_connection().in_atomic_block
        self._last = time.monotonic()

    def __enter__(self) -> Heartbeat:
        if not self._inline:
            _beats.add(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self._inline:
            _beats.remove(self)

    def _beat(self) -> None:
        if not turn_heartbeat(turn=self.turn):
            self.check_cancelled()
            self.lost = True

    def check_cancelled(self) -> None:
        """Note whether the turn was cancelled (then it is no longer this worker's either)."""
        if turns_cancelled(ids=[self.turn.pk]):
            self.cancelled = self.lost = True

    def tick(self) -> None:
        """Called by the run on each model event: beats when running inline."""
        if self._inline and time.monotonic() - self._last > settings.TURN_HEARTBEAT_SECONDS:
            self._beat()
            self._last = time.monotonic()


class _Beats:
    """The process's running turns' heartbeats, on one thread that runs while there are any."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[Heartbeat] = set()
        self._thread: threading.Thread | None = None

    def add(self, beat: Heartbeat) -> None:
        with self._lock:
            self._running.add(beat)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="rollback-heartbeats", daemon=True
                )
                self._thread.start()

    def remove(self, beat: Heartbeat) -> None:
        with self._lock:
            self._running.discard(beat)

    def _take(self) -> list[Heartbeat]:
        """The turns to look after now (none left that is not lost: the thread ends, under the
        lock that `add` takes to start another)."""
        with self._lock:
            running = [b for b in self._running if not b.lost]
            if not running:
                self._thread = None
            return running

    def _run(self) -> None:
        while True:
            interval = settings.TURN_HEARTBEAT_SECONDS
            time.sleep(min(interval, settings.TURN_STOP_POLL_SECONDS))
            running = self._take()  # after the wait: a run that ended meanwhile is not looked at
            if not running:
                return
            try:
                self._look_after(running, interval)
            except Exception:  # the database is away for a moment: try again next time
                log.warning("heartbeats failed", exc_info=True)
            finally:
                connection.close()  # none held between looks (PostgreSQL: back to the pool)

    def _look_after(self, running: list[Heartbeat], interval: float) -> None:
        now = time.monotonic()
        due = [b for b in running if now - b._last >= interval]
        lost: set[int] = set()
        if due:
            for beat in due:
                beat._last = now
            lost = turns_heartbeat(attempts=[(b.turn.pk, b.turn.attempts) for b in due])
        cancelled = turns_cancelled(ids=[b.turn.pk for b in running])
        with self._lock:  # a turn whose run has ended (`remove`) is left as it ended
            for beat in running:
                if beat not in self._running:
                    continue
                if beat.turn.pk in cancelled:
                    beat.cancelled = beat.lost = True
                elif beat.turn.pk in lost:
                    beat.lost = True


_beats = _Beats()
