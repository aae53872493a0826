"""The turn, top-down: claim, fit, stream, settle, store, after.

Three doors lead here and nowhere else: the Celery task (agents.tasks -> agents.worker ->
`run_queued`), the embedded mode (agents.dispatch runs the same task in process) and the
Python API (`RollbackAgent.run` -> `run_message`, which `AgentService`'s agents use).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from agno.run.agent import RunOutput

from core import events, logs
from core.errors import DomainError
from sessions_app.approvals import Pending, turn_approve
from sessions_app.errors import NothingAwaitsApproval
from sessions_app.models import Turn
from sessions_app.reply_stream import ReplyStream
from sessions_app.turns import turn_admit, turn_model_of

from ..context import overflowed
from ..mcp.vision import sees_images
from ..model import is_context_overflow, model_label
from .after import after, report_turn
from .claim import Heartbeat, claim_message, claim_queued
from .common import TurnRun, fail_turn
from .fit import fit, memories_of
from .phases import phase, spent, timing
from .resume import count_saved_calls, replay_batch, resumed_input
from .settle import settle
from .store import record_usage, store
from .stream import Streamed, stream

if TYPE_CHECKING:
    from .surface import TurnAgent

log = logging.getLogger("agents.turn")


def run_queued(turn_id: int, agent_for: Callable[[Turn], TurnAgent]) -> Turn | None:
    """A worker's turn: claim it (None when it was not queued; ClaimFailed when the database
    failed meanwhile), build its agent with `agent_for`, run it, then the after-work. Every
    line logged meanwhile carries the turn's ids; the last reports the outcome."""
    with logs.bound(turn_id=turn_id), timing():
        with phase("claim"):
            turn = claim_queued(turn_id)
        if turn is None:
            return None
        with logs.bound(**turn.log_ids()):
            try:
                if _run_built(turn, agent_for):
                    with phase("after"):
                        after(turn)
            finally:
                report_turn(turn)
        return turn


def _run_built(turn: Turn, agent_for: Callable[[Turn], TurnAgent]) -> bool:
    if turn.branch_id is None:
        fail_turn(turn, "The branch of this turn was deleted before it could run.")
        return False
    if turn.attempts <= 1:  # a turn's first run: one resumed or taken over runs to its end
        try:
            turn_admit(turn.session, turn_model_of(turn))
        except DomainError as exc:  # a budget used up, or a model taken away, since it queued
            fail_turn(turn, exc.message)
            return False
    try:
        with phase("agent"):
            agent = agent_for(turn)
    except Exception as exc:  # a broken configuration must fail the turn, not leave it running
        log.exception("could not build the agent for turn %s", turn.pk)
        fail_turn(turn, f"The agent could not start: {exc}")
        return False
    execute(agent, turn)
    return True


# The Python API's callbacks: a listener of the session's events, and the answer to a call that
# needs approval (the turn's `pending_approval` in, True approves).
Listener = Callable[[events.Event], None]
Approver = Callable[[Any], bool]


def run_message(
    agent: TurnAgent,
    message: str,
    *,
    on_event: Listener | None = None,
    approver: Approver | None = None,
) -> RunOutput | None:
    """The Python API's turn, synchronously, on the agent's branch; `agent.last_turn` is the
    Turn after it. Its events reach `on_event` (this call's, else `agent.on_event`) too. No
    after-work: seed 003's callers name their sessions themselves, and their model gets no
    requests they did not make.

    No worker runs its continuations: a call that needs approval is answered here, by
    `approver` (this call's, else `agent.approver`: called with the turn's `pending_approval`,
    True approves), and the turn resumes in this thread; without an approver the turn is left
    `awaiting_approval` (returned None) and `resume_message(agent, approved)` answers it and
    resumes it."""
    with _listening(agent, on_event or agent.on_event):
        turn, claimed = claim_message(agent, message)
        if not claimed:
            agent.last_turn = turn
            return None
        return _run_here(agent, turn, approver or agent.approver)


def resume_message(
    agent: TurnAgent,
    approved: bool,
    *,
    on_event: Listener | None = None,
    approver: Approver | None = None,
) -> RunOutput | None:
    """Answer the call `agent.last_turn` waits for (NothingAwaitsApproval when none does) and
    resume the turn in this thread, as `run_message` would have with an approver (`approver`
    answers the calls that wait after it)."""
    turn = agent.last_turn
    if turn is None:
        raise NothingAwaitsApproval("This agent has run no turn.")
    with _listening(agent, on_event or agent.on_event):
        return _answer_here(agent, turn, approved, approver or agent.approver)


@contextmanager
def _listening(agent: TurnAgent, on_event: Listener | None) -> Iterator[None]:
    """The session's events reach `on_event` (in this process) while the block runs."""
    stop = events.listen(agent.external_session.pk, on_event) if on_event else None
    try:
        yield
    finally:
        if stop is not None:
            stop()


def _run_here(agent: TurnAgent, turn: Turn, approver: Approver | None) -> RunOutput | None:
    with logs.bound(**turn.log_ids()):
        try:
            output = execute(agent, turn)
        finally:
            report_turn(turn)
    turn.refresh_from_db()
    agent.last_turn = turn
    if turn.status == Turn.Status.AWAITING_APPROVAL and approver is not None:
        pending = cast("Pending", turn.pending_approval)
        return _answer_here(agent, turn, bool(approver(pending)), approver)
    return output


def _answer_here(
    agent: TurnAgent, turn: Turn, approved: bool, approver: Approver | None
) -> RunOutput | None:
    turn.refresh_from_db()
    pending = turn.pending_approval if isinstance(turn.pending_approval, dict) else None
    if pending is None:
        raise NothingAwaitsApproval("This turn is not waiting for an approval now.")
    turn_approve(
        turn=turn,
        tool_call_id=pending.get("tool_call_id"),
        approved=approved,
        call=pending.get("call"),
        attempt=pending.get("attempt"),
        resume=False,  # no worker: the continuation runs here
    )
    claimed = claim_queued(turn.pk)
    if claimed is None:  # cannot happen unless something else runs it: say where it stands
        agent.last_turn = Turn.objects.get(pk=turn.pk)
        return None
    return _run_here(agent, claimed, approver)


def execute(agent: TurnAgent, turn: Turn) -> RunOutput | None:
    """Run a claimed turn to its end: done, or failed with the real cause. Whatever goes wrong
    (the model, the tools, storing the answer), the turn does not stay running.

    The attempt's state (agents.turn_state) is made here, with the MCP servers' tools offered
    to it (under the heartbeat: a listing may wait AGENT_MCP_TIMEOUT), and dropped when the
    attempt ends: the agent holds nothing of it afterwards."""
    reply = ReplyStream(session_id=turn.session_id, turn_id=turn.pk, attempt=turn.attempts)
    started = time.monotonic()
    with Heartbeat(turn) as beat, reply as partial:
        try:
            agent.branch_for(turn)
            with agent.attempt(turn, hold=beat) as state:
                label = model_label(agent.model)
                spent("prepare", (time.monotonic() - started) * 1000)
                return _steps(TurnRun(agent, state, beat, partial, label, started=started))
        except Exception as exc:
            log.exception("turn %s failed", turn.pk)
            fail_turn(turn, f"The turn failed: {type(exc).__name__}: {exc}")
            return None


def _steps(run: TurnRun) -> RunOutput | None:
    """Fit and stream, settle, store: the run's output (None when the turn was stopped, taken
    over, or ended before the model was asked)."""
    try:
        got = fit_and_stream(run)
    finally:
        # The attempt's MCP sessions (one per server used: agents.mcp.sessions) end with its
        # stream, before its answer is stored.
        run.agent.close_mcp_sessions()
    if got is not None:
        record_usage(run, got)  # its tokens were spent, whatever becomes of the answer
    state = run.state
    if got is None or state.paused:
        # Paused: the turn awaits an approval with its state saved on its row, and this attempt
        # ends here, holding nothing; the answer queues its continuation.
        return None
    if state.resumed is not None:
        count_saved_calls(got.output, state.resumed)
    with phase("settle"):
        settled = settle(run, got)
    if settled is None:
        return None if run.beat.lost else got.output
    with phase("store"):
        store(run, got, settled)
    return got.output


def fit_and_stream(run: TurnRun) -> Streamed | None:
    """Fit the history and stream the run; once more, fitted smaller, when the server (or the
    summariser) refused the request as too long for the window. None: the turn ended."""
    with phase("memories"):
        memories = memories_of(run)
    got = None
    for retry in (False, True):
        with phase("fit"):
            messages = fit(run, memories, retry=retry)
        if messages is None:
            return None
        if isinstance(messages, str):  # AGAIN
            continue
        resumed = run.state.resumed
        if resumed is not None:
            messages = resumed_input(messages, resumed, images=sees_images(run.agent.model))
            replay_batch(run.agent.model, resumed)
        with phase("model"):
            got = stream(run, messages)
        if retry or got.text or run.beat.lost or not is_context_overflow(str(got.failure)):
            return got
        # Our count fell short of the server's: count more for a while, fit this request into
        # a smaller share of the window, ask once more.
        log.warning("turn %s: the model's window was exceeded; fitting again", run.turn.pk)
        overflowed(run.label, str(got.failure))
    return got
