"""Running one turn: the branch's history to the model, the answer back into the database.

The model gets exactly the branch's stored history up to the turn's user message. Its new
messages (assistant steps with their tool calls, tool results, the final reply) are stored in one
transaction when the run ends, followed by the automatic checkpoint and, when the model was asked
to roll back and the agent carries out rollbacks (the web and API turns), the restore. A failed
run stores none of its messages; the user's message, stored when the turn started, stays.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agno.agent import Agent
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
from core import events, logs
from core.errors import DomainError, InvalidInput
from sessions_app.models import Turn
from sessions_app.services import branch_set_state
from sessions_app.stream import ReplyStream
from sessions_app.turns import (
    CUT_NOTE,
    BranchMoved,
    NewMessage,
    TurnTakenOver,
    cut_off,
    turn_claim,
    turn_fail,
    turn_finish,
    turn_heartbeat,
    turn_keep_stopped,
    turn_start,
    turn_store_messages,
)

from .context import ContextTooSmall, Fit, SummaryFailed, calibrate, fit_turn, overflowed
from .history import alternate, from_agno, to_agno
from .model import (
    ChatModel,
    is_context_overflow,
    is_demo,
    model_label,
    redact,
    reply_cut_off,
    reply_interrupted,
    tool_limit_hit,
)
from .services import turns_recover

if TYPE_CHECKING:
    from .rollback_agent import RollbackAgent

log = logging.getLogger(__name__)
# One line at the end of every turn (report_turn): its outcome, the model's latency and tokens.
turns_log = logging.getLogger("rollback.turns")


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
        with logs.bound(**turn.log_ids()):
            try:
                output = execute_turn(agent, turn)
            finally:
                report_turn(turn)
        turn.refresh_from_db()
        agent.last_turn = turn
        return output
    finally:
        if stop is not None:
            stop()


def fail_turn(turn: Turn, error: str, metadata: dict | None = None) -> None:
    """Fail the turn (`turn_fail` says so with `turn.failed`), unless it is no longer this
    worker's: then whoever holds the turn now reports it. The model server's address and key
    never reach the error text the user sees."""
    error = redact(error)
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


def report_turn(turn: Turn) -> None:
    """Log how the worker's attempt at `turn` ended, in one line (logger `rollback.turns`,
    "turn finished"): its status and finish reason, the model, its latency (`latency_ms` for the
    whole run, `first_token_ms` to the reply's first text), the tokens it reported and the tools
    run; a failed turn's error, at WARNING. A turn taken from this worker meanwhile (its attempt
    is no longer the turn's) is reported as `taken_over`, and its new worker reports the rest."""
    try:
        row = (
            Turn.objects.filter(pk=turn.pk)
            .values("status", "attempts", "error", "tools_used", "metadata")
            .first()
        )
    except Exception:  # the database is away: the turn's own lines said what happened
        log.warning("turn %s: could not read how it ended", turn.pk, exc_info=True)
        return
    if row is None:
        turns_log.info("turn finished", extra={"status": "deleted", "attempt": turn.attempts})
        return
    meta = row["metadata"] if isinstance(row["metadata"], dict) else {}
    status = row["status"]
    if row["attempts"] != turn.attempts or status in Turn.ACTIVE:
        status = "taken_over"
    usage = meta.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    tools = row["tools_used"] if isinstance(row["tools_used"], list) else []
    fields: dict[str, Any] = {
        "status": status,
        "finish_reason": meta.get("finish_reason")
        or ("cancelled" if status == Turn.Status.CANCELLED else None),
        "model": meta.get("model"),
        "latency_ms": meta.get("latency_ms"),
        "first_token_ms": meta.get("first_token_ms"),
        "input_tokens": usage.get("input_tokens"),
        "output_tokens": usage.get("output_tokens"),
        "total_tokens": usage.get("total_tokens"),
        "tool_calls": len(tools),
        "tools": tools,
        "attempt": turn.attempts,
    }
    failed = status == Turn.Status.FAILED
    if failed:
        fields["error"] = row["error"]
    turns_log.log(logging.WARNING if failed else logging.INFO, "turn finished", extra=fields)


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


@dataclass
class Streamed:
    """What a run relayed: its output, its error, and the reply's text streamed so far."""

    output: RunOutput | None = None
    error: str | None = None
    text: list[str] = field(default_factory=list)
    partial: ReplyStream | None = None  # the reply so far: stored, numbered and published
    started: set[str] = field(default_factory=set)  # the tool calls whose start was relayed
    # When the run's first request to the model went out, and when the reply's first text
    # arrived (time.monotonic()).
    sent_at: float = field(default_factory=time.monotonic)
    first_at: float | None = None


def _stream(
    agent: RollbackAgent, turn: Turn, messages: list[AgnoMessage], beat: Heartbeat, got: Streamed
) -> None:
    """Run the agent, relaying its stream into `got`. Stops early, closing the model's stream,
    when the turn was cancelled or taken from this worker."""
    release_pooled_connection()  # the model may take seconds: the stream needs no database
    stream = Agent.run(
        agent, input=messages, stream=True, stream_events=True, yield_run_output=True
    )
    try:
        for event in stream:
            beat.tick()
            if beat.lost:
                got.output = got.error = None
                return
            if isinstance(event, RunOutput):
                got.output = event
            elif isinstance(event, RunContentEvent):
                if isinstance(event.content, str) and event.content:
                    if got.first_at is None:
                        got.first_at = time.monotonic()
                    got.text.append(event.content)
                    if got.partial is not None:
                        got.partial.add(event.content)
            elif isinstance(event, ToolCallStartedEvent) and event.tool is not None:
                if got.partial is not None:
                    got.partial.flush()  # the text before the tool goes out before it
                got.started.add(event.tool.tool_call_id or "")
                events.tool_started(
                    session=turn.session_id,
                    turn=turn.pk,
                    tool=event.tool.tool_name or "",
                    args=event.tool.tool_args,
                    call_id=event.tool.tool_call_id,
                )
            elif isinstance(event, ToolCallCompletedEvent) and event.tool is not None:
                if got.partial is not None:
                    got.partial.flush()
                release_pooled_connection()  # a tool that used the database is done with it
                events.tool_finished(
                    session=turn.session_id,
                    turn=turn.pk,
                    tool=event.tool.tool_name or "",
                    call_id=event.tool.tool_call_id,
                    result=event.tool.result,
                    error=bool(event.tool.tool_call_error),
                )
            elif isinstance(event, RunErrorEvent):
                got.error = event.content or "the model call failed"
    finally:
        if got.partial is not None:
            got.partial.flush()  # all of the text goes out before the turn's end
        close = getattr(stream, "close", None)  # a generator: ends agno's run
        if close is not None:
            close()
        if beat.lost:
            # The model's HTTP response is closed only when openai's Stream is finalised, and it
            # sits in a reference cycle (the Stream and its own generator): collect it now, so
            # the request to the model ends at once instead of at some later collection.
            gc.collect()


def release_pooled_connection() -> None:
    """Give this thread's database connection back to the process's pool (PostgreSQL) while
    the turn waits on the model. Measured with 50 turns at once in a worker of 50 threads, the
    turns held all 10 connections of the pool (DATABASE_POOL_SIZE) for their whole stream and
    the others failed after DATABASE_POOL_TIMEOUT. The next query borrows one again. Nothing
    changes without a pool (SQLite keeps its one connection per thread)."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()


def keep_stopped(turn: Turn, got: Streamed, meta: dict) -> None:
    """The turn was cancelled while this worker ran it: keep what was streamed so far as the
    reply, marked stopped (the cancel already sent `turn.cancelled`)."""
    try:
        if turn_keep_stopped(turn=turn, reply="".join(got.text), metadata=meta):
            log.info("turn %s was stopped; its partial reply is kept", turn.pk)
    except Exception:
        log.exception("turn %s: could not keep its stopped reply", turn.pk)


def execute_turn(agent: RollbackAgent, turn: Turn) -> RunOutput | None:
    """Run a claimed turn to its end: done, or failed with the real cause. Whatever goes wrong
    (the model, the tools, storing the answer), the turn does not stay running."""
    reply = ReplyStream(session_id=turn.session_id, turn_id=turn.pk, attempt=turn.attempts)
    with Heartbeat(turn) as beat, reply as partial:
        try:
            return _execute(agent, turn, beat, partial)
        except Exception as exc:
            log.exception("turn %s failed", turn.pk)
            fail_turn(turn, f"The turn failed: {type(exc).__name__}: {exc}")
            return None


def _execute(
    agent: RollbackAgent, turn: Turn, beat: Heartbeat, partial: ReplyStream
) -> RunOutput | None:
    branch = agent.refresh_branch()
    agent.turn_position = turn.user_message_position
    agent.created_checkpoints = []
    agent.clear_rollback_request()
    label = model_label(agent.model)
    started = time.monotonic()
    got = Streamed(partial=partial)
    fit: Fit | None = None
    # The L0 lines of the user's memories most relevant to the message ride in the instructions,
    # within MEMORY_PROMPT_CHARS; the window's fitting counts them.
    memories = agent.memory_note(turn.message, budget=settings.MEMORY_PROMPT_CHARS)
    for attempt in (1, 2):
        try:
            # Fitted again after a refusal as too long: within a smaller share of the window,
            # for this request alone.
            fit = fit_turn(
                session=agent.external_session,
                branch=branch,
                end=turn.user_message_position or 0,
                message=turn.message,
                model=label,
                stop=lambda: beat.lost,
                extra_chars=len(memories or ""),
                retry=attempt > 1,
            )
        except ContextTooSmall as exc:
            agent.turn_position = None
            fail_turn(turn, exc.message, {"model": label})
            return None
        except SummaryFailed as exc:
            if exc.overflow and attempt == 1 and not beat.lost:
                continue  # fitted again, smaller (or with the window the server stated)
            agent.turn_position = None
            if beat.lost:
                beat.check_cancelled()
                return None
            fail_turn(
                turn,
                "The earlier messages of this conversation could not be summarised to fit the "
                f"model's window: {exc} Nothing was lost; send your message again once the model "
                "server answers.",
                {"model": label},
            )
            return None
        notes = [note for note in (memories, fit.context_note) if note]
        agent.additional_context = "\n\n".join(notes) or None
        messages = alternate(
            [*to_agno(fit.history), AgnoMessage(role="user", content=turn.message)]
        )
        if isinstance(agent.model, ChatModel):
            agent.model.begin_turn()
        got = Streamed(partial=partial)
        try:
            _stream(agent, turn, messages, beat, got)
        except Exception as exc:
            log.exception("turn %s failed", turn.pk)
            got.output, got.error = None, f"{type(exc).__name__}: {exc}"
        failure = got.error or (
            got.output.content
            if got.output is not None and got.output.status == RunStatus.error
            else None
        )
        if attempt == 1 and not got.text and not beat.lost and is_context_overflow(str(failure)):
            # Our count fell short of the server's: count more for a while, fit this request
            # into a smaller share of the window, ask once more.
            log.warning("turn %s: the model's window was exceeded; fitting again", turn.pk)
            overflowed(label, str(failure))
            continue
        break
    agent.turn_position = None
    if fit is not None and got.output is not None and not is_demo():
        calibrate(label, estimated=fit.raw_tokens, reported=_first_input_tokens(got.output))
    output, error = got.output, got.error
    latency_ms = round((time.monotonic() - started) * 1000)
    meta: dict[str, Any] = {"model": label, "demo": is_demo(), "latency_ms": latency_ms}
    if got.first_at is not None:
        # From the agent's first request to the model (after fitting the window, summaries
        # included) to the reply's first text: tool rounds before the reply count.
        meta["first_token_ms"] = round((got.first_at - got.sent_at) * 1000)
    if fit is not None:
        meta["context"] = fit.record()
    if beat.lost and not beat.cancelled:
        beat.check_cancelled()
    if beat.cancelled:
        keep_stopped(turn, got, meta)
        return None
    if beat.lost:
        log.info("turn %s was taken from this worker mid-run; its answer is dropped", turn.pk)
        return None
    if output is not None and output.status == RunStatus.cancelled and not error:
        fail_turn(turn, "The reply was interrupted before it finished; it was not kept.", meta)
        return output
    if output is None or error or output.status != RunStatus.completed:
        reason = error or (output.content if output is not None else None) or "no answer"
        if is_context_overflow(str(reason)):
            reason = (
                f"{reason} (the request was longer than the model's window even after fitting "
                "it: set AGENT_CONTEXT_TOKENS, or the session's settings.context_tokens, to the "
                "model's real window)"
            )
        fail_turn(turn, f"The model did not answer: {reason}", meta)
        return output
    try:
        return _complete(agent, turn, output, meta, got)
    except Exception as exc:
        log.exception("turn %s: the answer could not be stored", turn.pk)
        fail_turn(turn, f"The answer could not be stored: {type(exc).__name__}: {exc}", meta)
        return output


def _first_input_tokens(output: RunOutput) -> int | None:
    """The input tokens the server reported for the run's first request."""
    for m in output.messages or []:
        if m.role == "assistant" and not m.from_history and m.metrics is not None:
            return m.metrics.input_tokens or None
    return None


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


def finish_reason_of(agent: RollbackAgent, cut: bool) -> str:
    """Why the run's reply ended: the tool-call limit, a length limit, a stream that ended
    without a finish, or the model's own stop."""
    if tool_limit_hit(agent.model):
        return "tool_limit"
    if cut:
        return "length"
    if reply_interrupted(agent.model):
        return "interrupted"
    return "stop"


def report_unrun_tools(turn: Turn, new: list[NewMessage], got: Streamed) -> None:
    """agno sends no events for a tool call it refused (an unknown tool, arguments that are
    not JSON, a call past the limit): report each as started and finished with an error, so
    that every call has exactly one `tool.started` and one `tool.finished`."""
    for m in new:
        if m.role != "tool" or not m.metadata.get("error") or m.tool_call_id in got.started:
            continue
        call_id = m.tool_call_id or None
        events.tool_started(
            session=turn.session_id,
            turn=turn.pk,
            tool=m.tool_name,
            args=m.tool_args,
            call_id=call_id,
        )
        events.tool_finished(
            session=turn.session_id,
            turn=turn.pk,
            tool=m.tool_name,
            call_id=call_id,
            result=m.tool_result,
            error=True,
        )


def _complete(
    agent: RollbackAgent, turn: Turn, output: RunOutput, meta: dict, got: Streamed
) -> RunOutput:
    """Store the run's messages, take the automatic checkpoint, carry out a rollback the model
    asked for (when the agent carries out rollbacks) and finish the turn, in one transaction;
    the services announce each change once it commits (checkpoint.created, branch.changed,
    turn.finished)."""
    ran = {t.tool_call_id for t in output.tools or [] if t.tool_call_id and not t.tool_call_error}
    new = from_agno(output.messages or [], model=meta["model"], ran=ran)
    report_unrun_tools(turn, new, got)
    reply = output.content if isinstance(output.content, str) else str(output.content or "")
    last = new[-1] if new and new[-1].role == "assistant" else None
    if not reply.strip():
        fail_turn(turn, "The model sent an empty reply.", meta)
        return output
    # A reply cut short by a length limit (AGENT_MAX_REPLY_CHARS, or max_tokens at the server)
    # is kept, marked as cut off, and the turn ends with finish_reason "length"; one whose stream
    # ended without a finish is kept too, with "interrupted". Either can be continued.
    limit = settings.AGENT_MAX_REPLY_CHARS
    cut = reply_cut_off(agent.model) or (last is not None and len(last.content) > limit)
    finish_reason = finish_reason_of(agent, cut)
    if cut:
        reply = cut_off(reply, limit)
        if got.partial is not None:
            got.partial.add(CUT_NOTE)
            got.partial.flush()
    if last is not None:
        last.metadata.update({"latency_ms": meta["latency_ms"], **_usage(output)})
        last.metadata["finish_reason"] = finish_reason
        if cut:
            last.content = cut_off(last.content, limit)
        if meta["demo"]:
            last.metadata["demo"] = True
    tools_used = [
        m.tool_name for m in new if m.role == "tool" and m.tool_name and not m.metadata.get("error")
    ]
    requested = agent.requested_rollback
    auto = None
    rolled_back_to = None
    meta = {**meta, "usage": _usage(output), "finish_reason": finish_reason}
    try:
        with transaction.atomic():
            branch = turn_store_messages(turn=turn, messages=new)
            try:
                branch_set_state(branch=branch, session_state=agent.persistent_state())
            except InvalidInput as exc:
                # The agent's state outgrew the limits (ROLLBACK_STATE_MAX_BYTES, the depth):
                # the answer is kept, the stored state stays as it was, and the turn says why.
                log.warning("turn %s: the session state was not saved: %s", turn.pk, exc.message)
                meta["state_not_saved"] = exc.message
            others = [name for name in tools_used if name not in agent.checkpoint_tools]
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
            if requested is not None and not agent.carry_out_rollbacks:
                # Seed 003's API: the caller carries it out (AgentService.rollback_to_checkpoint).
                meta["rollback_requested"] = requested
            elif requested is not None:
                try:
                    if agent.carry_out_rollback():
                        rolled_back_to = agent.last_rollback
                        # The branch it made: the page tells the user they were moved there.
                        meta["rollback_branch"] = agent.internal_session.pk
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
        keep_stopped(turn, got, meta)  # when it was cancelled just before its end
        return output
    except BranchMoved as exc:
        fail_turn(turn, str(exc), meta)
        return output
    return output
