"""Step 4, settle: what the run came to. The model is calibrated against the tokens the
server reported, the turn's metadata is gathered, and a turn that cannot be stored ends here:
stopped (its calls' messages and partial reply kept), taken over by another worker (its answer
dropped), interrupted, or failed with the model's own error."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from agno.run.agent import RunOutput
from agno.run.base import RunStatus

from core.model_choice import is_demo
from sessions_app.turns import ledger_record_unstored

from ..context import calibrate
from ..model import is_context_overflow
from ..tools import DEFAULT_EFFECT
from .common import TurnMeta, TurnRun, fail_turn, keep_stopped
from .stopped import earlier_external_calls
from .stream import Streamed

log = logging.getLogger("agents.turn.settle")


@dataclass
class Settled:
    """A run that answered: its output and the metadata to store with it."""

    output: RunOutput
    meta: TurnMeta


def settle(run: TurnRun, got: Streamed) -> Settled | None:
    """The answer to store, or None when the turn ended here (its external calls then go into
    the ledger all the same: record_unstored)."""
    if run.fit is not None and got.output is not None and not is_demo():
        calibrate(run.label, estimated=run.fit.raw_tokens, reported=first_input_tokens(got.output))
    meta = turn_meta(run, got)
    if _not_ours(run, got, meta):
        return None
    settled = _settled(run, got, meta)
    if settled is None:
        record_unstored(run, got)
    return settled


def _settled(run: TurnRun, got: Streamed, meta: TurnMeta) -> Settled | None:
    output = got.output
    if output is not None and output.status == RunStatus.cancelled and not got.error:
        fail_turn(run.turn, "The reply was interrupted before it finished; it was not kept.", meta)
        return None
    if output is None or got.error or output.status != RunStatus.completed:
        fail_turn(run.turn, f"The model did not answer: {_reason(got)}", meta)
        return None
    return Settled(output, meta)


def stopped_or_recorded(run: TurnRun, got: Streamed, meta: TurnMeta) -> None:
    """A stopped turn keeps what it did (common.keep_stopped), its calls that never answered
    going into the ledger as calls that may have run; when it cannot, all its external calls go
    into the ledger without messages."""
    kept = keep_stopped(run, "".join(got.text), got.calls.values(), meta)
    record_unstored(run, got, only_open=kept)


def record_unstored(
    run: TurnRun, got: Streamed, *, only_open: bool = False, ended: bool = True
) -> None:
    """The external calls this attempt made, into the session's effects ledger, for a turn that
    ends without storing its messages (stopped, failed, taken over): their effects happened. A
    call its owner refused did not run, and a tool of another effect changed nothing outside.
    `only_open`: only the calls that never answered (a stopped turn stored the others). A
    continuation's turn that `ended` (failed, or stopped without keeping its messages) also
    records the external calls of the batches before its pause, which ran in earlier attempts
    and are stored nowhere else; one taken over does not (whoever holds it now stores them)."""
    state = run.state
    calls = [
        call
        for call_id, call in got.calls.items()
        if state.tool_effects.get(call.tool_name, DEFAULT_EFFECT) == "external"
        and not state.was_refused(call.call_id or call_id, call.args)
        and not (only_open and call.result is not None)
    ]
    if ended and not only_open:
        calls = [*earlier_external_calls(state.resumed), *calls]
    try:
        ledger_record_unstored(turn=run.turn, calls=calls)
    except Exception:  # the database is away: the turn's own lines say what happened
        log.exception("turn %s: its calls could not be recorded in the ledger", run.turn.pk)


def turn_meta(run: TurnRun, got: Streamed) -> TurnMeta:
    meta: TurnMeta = {
        "model": run.label,
        "demo": is_demo(),
        "latency_ms": round((time.monotonic() - run.started) * 1000),
    }
    if got.first_at is not None:
        # From the agent's first request to the model (after fitting the window, summaries
        # included) to the reply's first text: tool rounds before the reply count.
        meta["first_token_ms"] = round((got.first_at - got.sent_at) * 1000)
    if run.fit is not None:
        meta["context"] = run.fit.record()
    notices = run.state.notices
    if notices:
        meta["notices"] = list(notices)  # an MCP server that was down (agents.mcp)
    return meta


def _not_ours(run: TurnRun, got: Streamed, meta: TurnMeta) -> bool:
    """Whether the turn stopped being this worker's: cancelled (what it did is kept) or taken
    over (whoever holds it now finishes it; its external calls go into the ledger)."""
    beat = run.beat
    ended = got.output is not None and got.output.status == RunStatus.cancelled
    if (beat.lost or ended) and not beat.cancelled:
        # A run that ended as cancelled: a tool's wait saw the Stop first (agents.tool_deadline)
        beat.check_cancelled()
    if beat.cancelled:
        stopped_or_recorded(run, got, meta)
        return True
    if beat.lost:
        log.info("turn %s was taken from this worker mid-run; its answer is dropped", run.turn.pk)
        record_unstored(run, got, ended=False)
        return True
    return False


def _reason(got: Streamed) -> str:
    output = got.output
    reason = got.error or (output.content if output is not None else None) or "no answer"
    if is_context_overflow(str(reason)):
        return (
            f"{reason} (the request was longer than the model's window even after fitting "
            "it: set AGENT_CONTEXT_TOKENS, or the session's settings.context_tokens, to the "
            "model's real window)"
        )
    return str(reason)


def first_input_tokens(output: RunOutput) -> int | None:
    """The input tokens the server reported for the run's first request."""
    for m in output.messages or []:
        if m.role == "assistant" and not m.from_history and m.metrics is not None:
            return m.metrics.input_tokens or None
    return None
