"""What every step of the turn shares: the run in progress, the metadata stored with the
turn, and the two ways a step ends a turn early (failed, or stopped keeping what it did)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from sessions_app.models import Turn
from sessions_app.reply_stream import ReplyStream
from sessions_app.turns import UnstoredCall, turn_fail, turn_keep_stopped

from ..model import redact
from .stopped import Calls, earlier_messages, stopped_messages

if TYPE_CHECKING:
    from ..context import Fit
    from ..turn_state import TurnState
    from .claim import Heartbeat
    from .surface import TurnAgent

log = logging.getLogger("agents.turn")


class TurnMeta(TypedDict, total=False):
    """`Turn.metadata` as the pipeline writes it (sessions_app.models.Turn reads it)."""

    model: str
    demo: bool
    latency_ms: int
    first_token_ms: int
    context: dict[str, Any]
    usage: dict[str, int]
    finish_reason: str
    state_not_saved: str
    rollback_requested: int
    rollback_branch: int
    rollback_error: str
    notices: list[str]


@dataclass
class TurnRun:
    """One claimed turn's attempt on its way through the steps: the agent, the attempt's state
    (what its tools see and a pause saves: agents.turn_state), and the pipeline's own means."""

    agent: TurnAgent
    state: TurnState
    beat: Heartbeat
    partial: ReplyStream
    label: str  # the model's name, as stored
    started: float = field(default_factory=time.monotonic)
    fit: Fit | None = None

    @property
    def turn(self) -> Turn:
        return self.state.turn


def fail_turn(turn: Turn, error: str, metadata: TurnMeta | None = None) -> None:
    """Fail the turn (`turn_fail` says so with `turn.failed`), unless it is no longer this
    worker's: then whoever holds the turn now reports it. The model server's address and key
    never reach the error text the user sees."""
    error = redact(error)
    try:
        failed = turn_fail(turn=turn, error=error, metadata=dict(metadata or {}))
    except Exception:
        # The database itself is failing: the heartbeat stops with this run, and the recovery
        # job takes the turn over or fails it once the database answers again.
        log.exception("turn %s: could not record its failure (%s)", turn.pk, error)
        return
    if not failed:
        log.info(
            "turn %s is no longer this worker's (%s); its failure is not recorded",
            turn.pk,
            turn.status,
        )


def keep_stopped(run: TurnRun, reply: str, seen: Iterable[UnstoredCall], meta: TurnMeta) -> bool:
    """The turn was cancelled while this worker ran it: keep what it did (sessions_app.turns.
    turn_keep_stopped): the messages of the calls the stream saw (`seen`: agents.turn.stopped),
    after those of the batches before its pause when it is a continuation, and `reply`, what
    was streamed so far, as its stopped reply. False when they could not be kept (the turn was
    not cancelled but taken over, its branch moved, the database failed): the caller then puts
    its calls in the ledger without messages."""
    state = run.state
    calls = Calls(seen, state.was_refused, state.tool_effects, run.label, state.images_of)
    messages, may_have_run = stopped_messages(calls)
    try:
        kept = turn_keep_stopped(
            turn=run.turn,
            reply=reply,
            messages=[*earlier_messages(state.resumed), *messages],
            may_have_run=may_have_run,
            metadata=dict(meta),
        )
    except Exception:
        log.exception("turn %s: could not keep what it did before it was stopped", run.turn.pk)
        return False
    if kept:
        log.info("turn %s was stopped; its calls and partial reply are kept", run.turn.pk)
    return kept
