"""Running one turn: the branch's history to the model, the answer back into the database.

The model gets exactly the branch's stored history up to the turn's user message. Its new
messages (assistant steps with their tool calls, tool results, the final reply) are stored in one
transaction when the run ends, followed by the automatic checkpoint and, when the model was asked
to roll back, the restore. A failed run stores none of its messages; the user's message, stored
when the turn started, stays.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Any

from agno.agent import Agent
from agno.models.base import Model
from agno.models.message import Message as AgnoMessage
from agno.run.agent import (
    RunContentEvent,
    RunErrorEvent,
    RunOutput,
    ToolCallCompletedEvent,
    ToolCallStartedEvent,
)
from agno.run.base import RunStatus
from django.conf import settings
from django.db import close_old_connections, connection, transaction

from checkpoints.services import checkpoint_create
from core import events
from sessions_app.errors import DomainError
from sessions_app.models import ExternalSession, Turn
from sessions_app.selectors import branch_history
from sessions_app.services import branch_set_state
from sessions_app.turns import (
    BranchMoved,
    TurnTakenOver,
    turn_claim,
    turn_fail,
    turn_finish,
    turn_heartbeat,
    turn_start,
    turn_store_messages,
)

from .history import from_agno, to_agno
from .model import build_model, is_demo, model_label
from .rollback_agent import CHECKPOINT_TOOLS, RollbackAgent
from .services import turns_recover

log = logging.getLogger(__name__)


def auto_checkpoint_enabled(session: ExternalSession) -> bool:
    """The session's own setting, else its owner's preference, else on."""
    value = session.settings.get("auto_checkpoint")
    if isinstance(value, bool):
        return value
    value = session.owner.preference("auto_checkpoint", True)
    return value if isinstance(value, bool) else True


def agent_for_turn(turn: Turn, model: Model | None = None) -> RollbackAgent:
    session = turn.session
    return RollbackAgent(
        external_session_id=session.pk,
        user=session.owner,
        model=model or build_model(session.settings),
        auto_checkpoint=auto_checkpoint_enabled(session),
        skip_session_creation=True,
        internal_session_id=turn.branch_id,
        activate_branch=False,
    )


def run_turn(turn_id: int, *, model: Model | None = None) -> Turn | None:
    """Claim a queued turn and run it. None when it was not queued (a redelivered task, a turn
    another worker took over, a deleted session): the reason is logged and nothing is stored."""
    turn = turn_claim(turn_id=turn_id, worker=f"{socket.gethostname()}:{os.getpid()}")
    if turn is None:
        state = Turn.objects.filter(pk=turn_id).values_list("status", flat=True).first()
        log.info("turn %s not run: %s", turn_id, f"it is {state}" if state else "it is gone")
        return None
    if turn.branch_id is None:
        _fail(turn, "The branch of this turn was deleted before it could run.")
        return turn
    try:
        agent = agent_for_turn(turn, model)
    except Exception as exc:  # a broken configuration must fail the turn, not leave it running
        log.exception("could not build the agent for turn %s", turn_id)
        _fail(turn, f"The agent could not start: {exc}")
        return turn
    execute_turn(agent, turn)
    turn.refresh_from_db()
    return turn


def run_turn_with_agent(agent: RollbackAgent, message: str) -> RunOutput | None:
    """RollbackAgent.run: a whole turn, synchronously, on the agent's branch."""
    session_id = agent.external_session.pk
    stop = events.listen(session_id, agent.on_event) if agent.on_event else None
    try:
        turns_recover(session=agent.external_session)
        queued = turn_start(
            session=agent.external_session, message=message, branch=agent.internal_session
        )
        turn = turn_claim(turn_id=queued.pk)
        if turn is None:  # taken by a worker meanwhile (cannot happen unless it was enqueued)
            agent.last_turn = Turn.objects.get(pk=queued.pk)
            return None
        output = execute_turn(agent, turn)
        turn.refresh_from_db()
        agent.last_turn = turn
        return output
    finally:
        if stop is not None:
            stop()


def _fail(turn: Turn, error: str, metadata: dict | None = None) -> None:
    """Fail the turn (`turn_fail` says so with `turn.failed`), unless it is no longer this
    worker's: then whoever holds the turn now reports it."""
    try:
        failed = turn_fail(turn=turn, error=error, metadata=metadata)
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


class Heartbeat:
    """Touches the turn's heartbeat every TURN_HEARTBEAT_SECONDS on a thread of its own, so a
    slow model (minutes between tokens) never looks like a dead worker, and notes when the turn
    stopped being this worker's (`lost`), so the run stops early.

    A turn run inside the caller's open transaction (the Python API called from a transaction,
    the tests) cannot be seen by another connection: there the run beats inline instead."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._inline = transaction.get_connection().in_atomic_block
        self._last = time.monotonic()

    def __enter__(self) -> Heartbeat:
        if not self._inline:
            self._thread = threading.Thread(
                target=self._run, name=f"turn-{self.turn.pk}-heartbeat", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _beat(self) -> None:
        if not turn_heartbeat(turn=self.turn):
            self.lost = True

    def _run(self) -> None:
        interval = settings.TURN_HEARTBEAT_SECONDS
        try:
            while not self.lost and not self._stop.wait(interval):
                try:
                    self._beat()
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


def _stream(
    agent: RollbackAgent, turn: Turn, messages: list[AgnoMessage], beat: Heartbeat
) -> tuple[RunOutput | None, str | None]:
    """Run the agent, relaying its stream. Returns (RunOutput or None, error or None); stops
    early, with neither, when the turn was taken from this worker."""
    output: RunOutput | None = None
    error: str | None = None
    stream = Agent.run(
        agent, input=messages, stream=True, stream_events=True, yield_run_output=True
    )
    try:
        for event in stream:
            beat.tick()
            if beat.lost:
                return None, None
            if isinstance(event, RunOutput):
                output = event
            elif isinstance(event, RunContentEvent):
                if isinstance(event.content, str) and event.content:
                    events.message_delta(session=turn.session_id, turn=turn.pk, delta=event.content)
            elif isinstance(event, ToolCallStartedEvent) and event.tool is not None:
                events.tool_started(
                    session=turn.session_id,
                    turn=turn.pk,
                    tool=event.tool.tool_name or "",
                    args=event.tool.tool_args,
                    call_id=event.tool.tool_call_id,
                )
            elif isinstance(event, ToolCallCompletedEvent) and event.tool is not None:
                events.tool_finished(
                    session=turn.session_id,
                    turn=turn.pk,
                    tool=event.tool.tool_name or "",
                    call_id=event.tool.tool_call_id,
                    result=event.tool.result,
                    error=bool(event.tool.tool_call_error),
                )
            elif isinstance(event, RunErrorEvent):
                error = event.content or "the model call failed"
    finally:
        close = getattr(stream, "close", None)  # a generator: ends agno's run and its request
        if close is not None:
            close()
    return output, error


def execute_turn(agent: RollbackAgent, turn: Turn) -> RunOutput | None:
    """Run a claimed turn to its end: done, or failed with the real cause. Whatever goes wrong
    (the model, the tools, storing the answer), the turn does not stay running."""
    with Heartbeat(turn) as beat:
        try:
            return _execute(agent, turn, beat)
        except Exception as exc:
            log.exception("turn %s failed", turn.pk)
            _fail(turn, f"The turn failed: {type(exc).__name__}: {exc}")
            return None


def _execute(agent: RollbackAgent, turn: Turn, beat: Heartbeat) -> RunOutput | None:
    branch = agent.refresh_branch()
    history = branch_history(branch, end=turn.user_message_position)
    messages = to_agno(history) + [AgnoMessage(role="user", content=turn.message)]
    agent.turn_position = turn.user_message_position
    agent.created_checkpoints = []
    agent.clear_rollback_request()
    label = model_label(agent.model)
    started = time.monotonic()
    try:
        output, error = _stream(agent, turn, messages, beat)
    except Exception as exc:
        log.exception("turn %s failed", turn.pk)
        output, error = None, f"{type(exc).__name__}: {exc}"
    finally:
        agent.turn_position = None
    if beat.lost:
        log.info("turn %s was taken from this worker mid-run; its answer is dropped", turn.pk)
        return None
    latency_ms = round((time.monotonic() - started) * 1000)
    meta: dict[str, Any] = {"model": label, "demo": is_demo(), "latency_ms": latency_ms}
    if output is not None and output.status == RunStatus.cancelled and not error:
        _fail(turn, "The reply was interrupted before it finished; it was not kept.", meta)
        return output
    if output is None or error or output.status != RunStatus.completed:
        reason = error or (output.content if output is not None else None) or "no answer"
        _fail(turn, f"The model did not answer: {reason}", meta)
        return output
    try:
        return _complete(agent, turn, output, meta)
    except Exception as exc:
        log.exception("turn %s: the answer could not be stored", turn.pk)
        _fail(turn, f"The answer could not be stored: {type(exc).__name__}: {exc}", meta)
        return output


def _usage(output: RunOutput) -> dict[str, int]:
    metrics = output.metrics
    if metrics is None:
        return {}
    usage = {
        "input_tokens": metrics.input_tokens or 0,
        "output_tokens": metrics.output_tokens or 0,
        "total_tokens": metrics.total_tokens or 0,
    }
    return usage if any(usage.values()) else {}


def _complete(agent: RollbackAgent, turn: Turn, output: RunOutput, meta: dict) -> RunOutput:
    """Store the run's messages, take the automatic checkpoint, carry out a rollback the model
    asked for and finish the turn, in one transaction; the services announce each change once it
    commits (checkpoint.created, branch.changed, turn.finished)."""
    new = from_agno(output.messages or [], model=meta["model"])
    if new and new[-1].role == "assistant":
        new[-1].metadata.update({"latency_ms": meta["latency_ms"], **_usage(output)})
        if meta["demo"]:
            new[-1].metadata["demo"] = True
    tools_used = [m.tool_name for m in new if m.role == "tool" and m.tool_name]
    reply = output.content if isinstance(output.content, str) else str(output.content or "")
    requested = agent.requested_rollback
    auto = None
    rolled_back_to = None
    meta = {**meta, "usage": _usage(output)}
    try:
        with transaction.atomic():
            branch = turn_store_messages(turn=turn, messages=new)
            branch_set_state(branch=branch, session_state=agent.persistent_state())
            others = [name for name in tools_used if name not in CHECKPOINT_TOOLS]
            if others and agent.auto_checkpoint:
                auto = checkpoint_create(
                    branch=branch,
                    name=f"after-{others[-1]}",
                    is_auto=True,
                    metadata={
                        "trigger": "tool_call",
                        "tool_name": others[-1],
                        "message_count": branch.message_count,
                        "turn": turn.pk,
                    },
                )
            if requested is not None:
                from .service import AgentService

                try:
                    if AgentService().handle_agent_response(agent, output):
                        rolled_back_to = agent.last_rollback
                except DomainError as exc:
                    meta["rollback_error"] = exc.message
            if not turn_finish(
                turn=turn,
                reply=reply,
                tools_used=tools_used,
                checkpoint=auto,
                rolled_back_to=rolled_back_to,
                metadata=meta,
            ):
                raise TurnTakenOver("This turn ended elsewhere before its answer was stored.")
    except TurnTakenOver as exc:
        log.info("turn %s: %s", turn.pk, exc)
        return output
    except BranchMoved as exc:
        _fail(turn, str(exc), meta)
        return output
    return output
