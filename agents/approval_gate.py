"""Tool calls that wait for their owner's approval before they run.

The agent's tools whose names are in `RollbackAgent.tool_approvals` (custom tools declared with
`tool_effect(..., approval=True)`, MCP tools that need it) pass through `ApprovalGate.hook`, an
agno tool hook that wraps every call (installed on the agno agent, so no tool can slip past it,
whatever the helper that adds names to the set does later). agno runs a sync run's tools on the
thread that iterates its stream, right after it yields the call's ToolCallStarted event: the
stream step announces the call id and the model's arguments it saw there (`announce`), and the
hook, which agno gives only the tool's name and arguments, takes them. So the hook always runs
on the worker's thread (a Celery worker, the embedded pool, or the Python API's caller), never
on the web server's event loop.

Each call that waits is one call of one attempt (sessions_app.approvals): it is numbered among
the attempt's calls that waited (`TurnRun.approval_calls`) and carries its id, tool and the hash
of its arguments, and only an answer to exactly that call lets it run. Two calls sharing an id
are asked about one by one; an id the model server repeats later is asked about again.

The hook pauses the turn (`turn_await_approval`: `awaiting_approval`, `tool.approval_requested`)
and waits, its heartbeat going on, until:
- the owner approves (the tool runs; the turn is running again),
- the owner refuses, or nobody answers in AGENT_APPROVAL_SECONDS (reason "timed_out"): the tool
  does not run and the model gets a result saying so, marked as an error (not "used"),
- the turn is cancelled or taken from this worker: the tool does not run and the run stops.
It wakes on the answer's event (from any process, through the turn's doorbell, core.wake) and
reads the turn's row every TURN_STOP_POLL_SECONDS at most, so an answer whose ring was lost is
seen too.

A worker that dies during the wait stops beating; the recovery job hands the turn to another
worker, which runs it again from its user message and asks again. An approval is not carried
over to the new attempt on purpose: the first worker may have run the tool before it died, and
only the owner can say whether running it a second time is what they want. The recovery records
each call the dead attempt approved as one that may have run, and the new attempt's card for the
same call says so.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agno.exceptions import AgentRunException
from django.conf import settings
from django.db import DatabaseError, connection

from core import wake
from sessions_app.approvals import (
    Pending,
    answer_for,
    args_digest,
    pending_call,
    turn_approval_expire,
    turn_await_approval,
)
from sessions_app.models import Turn
from sessions_app.turns import HELD

if TYPE_CHECKING:
    from .turn.common import TurnRun

log = logging.getLogger("agents.approval_gate")

REFUSED = (
    "The user refused this call of {tool}: it did not run. Do not call it again unless the user "
    "asks for it; say what you would have done instead."
)
TIMED_OUT = (
    "Nobody approved this call of {tool} within {seconds:g} s, so it did not run (counted as "
    "refused). Do not call it again unless the user asks for it."
)
STOPPED = "The turn was stopped while this call of {tool} waited for approval: it did not run."

# The events that end a wait for an approval: the owner's answer, or the turn stopped.
WAKES = frozenset({"tool.approval_answered", "turn.cancelled"})


class ApprovalRefused(AgentRunException):
    """Raised by the hook instead of running the tool: agno gives the model its text as the
    call's result, marked as an error (so the call is not among the turn's `tools_used`). An
    AgentRunException, which agno takes as the tool's own way to answer: a plain exception would
    be logged as a crash with its traceback, and a refusal is no crash."""


@dataclass(frozen=True)
class Outcome:
    approved: bool
    reason: str  # "approved", "refused", "timed_out", "cancelled", "lost"


@dataclass(frozen=True)
class Announced:
    """A call the stream saw start: its id and the model's own arguments."""

    call_id: str
    args: dict[str, Any]


class ApprovalGate:
    """One agent's gate: the names of its tools that wait (the agent's own set, shared, so a
    name added later counts), the run it belongs to while a turn runs, and the calls the stream
    announced and the hook has not taken yet."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.run: TurnRun | None = None
        self._announced: dict[str, list[Announced]] = {}
        # The calls it refused (the owner refused, or no answer came in time), by id and the
        # hash of their arguments (ids repeat): they did not run, so their tool messages record
        # no effect (agents.turn.store).
        self.refused: set[tuple[str, str]] = set()

    def begin(self, run: TurnRun | None) -> None:
        """The turn whose calls this gate asks about (None once its stream ended)."""
        self.run = run
        self._announced.clear()
        if run is not None and run.approval_calls == 0:
            self.refused.clear()

    def announce(self, tool_name: str | None, call_id: str | None, args: object = None) -> None:
        """The stream saw ToolCallStarted for this call: its tool runs next, on this thread."""
        if tool_name in self.names and call_id:
            given = dict(args) if isinstance(args, dict) else {}
            self._announced.setdefault(tool_name, []).append(Announced(call_id, given))

    def _take(self, tool_name: str, arguments: dict[str, Any]) -> Announced:
        waiting = self._announced.get(tool_name)
        if waiting:
            return waiting.pop(0)
        # Not announced (a run whose events were not streamed): the call still waits, under an
        # id of its own the owner answers to.
        return Announced(f"approval_{uuid.uuid4().hex[:16]}", model_args(arguments))

    def was_refused(self, call_id: str, args: object) -> bool:
        return (call_id, args_digest(args if args is not None else {})) in self.refused

    def hook(
        self,
        function_name: str,
        function_call: Callable[..., Any],
        arguments: dict[str, Any],
    ) -> Any:
        """agno's tool hook around every call: runs the tool at once when it needs no approval,
        else only once its owner approved this very call (ApprovalRefused otherwise)."""
        if function_name not in self.names:
            return function_call(**arguments)
        seen = self._take(function_name, arguments)
        run = self.run
        if run is None:
            raise ApprovalRefused(
                f"{function_name} needs its owner's approval, and no turn is there to ask it in."
            )
        run.approval_calls += 1  # its place among this attempt's calls that waited
        pending = pending_call(
            turn=run.turn,
            call=run.approval_calls,
            tool_call_id=seen.call_id,
            tool_name=function_name,
            args=seen.args,
        )
        outcome = wait_for_answer(run, pending)
        log.info(
            "turn %s: %s (%s, call %s) %s",
            run.turn.pk,
            function_name,
            seen.call_id,
            pending["call"],
            outcome.reason,
        )
        if outcome.approved:
            return function_call(**arguments)
        self.refused.add((seen.call_id, pending["args_sha256"]))
        raise ApprovalRefused(refusal_text(function_name, outcome.reason))


def model_args(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments agno passes a tool, less what it injects (the agent, the run context)."""
    return {
        k: v
        for k, v in arguments.items()
        if isinstance(v, str | int | float | bool | list | dict | type(None))
    }


def refusal_text(tool: str, reason: str) -> str:
    if reason == "refused":
        return REFUSED.format(tool=tool)
    if reason == "timed_out":
        return TIMED_OUT.format(tool=tool, seconds=settings.AGENT_APPROVAL_SECONDS)
    return STOPPED.format(tool=tool)


def wait_for_answer(run: TurnRun, pending: Pending) -> Outcome:
    """Pause the turn for the call and wait for its end (module docstring)."""
    turn = run.turn
    if not turn_await_approval(turn=turn, pending=pending):
        run.beat.check_cancelled()
        run.beat.lost = True
        return Outcome(False, "cancelled" if run.beat.cancelled else "lost")
    seen: list[Outcome] = []

    def ended() -> bool:
        run.beat.tick()
        try:
            outcome = Outcome(False, "lost") if run.beat.lost else _read_answer(run, pending)
        except DatabaseError:  # the database is away for a moment: look again next poll
            log.warning("turn %s: could not read its approval", turn.pk, exc_info=True)
            return False
        if not connection.in_atomic_block and connection.settings_dict.get("OPTIONS", {}).get(
            "pool"
        ):
            connection.close()  # the wait may be long: the pooled connection goes back
        if outcome is not None:
            seen.append(outcome)
        return outcome is not None

    poll = min(0.5, settings.TURN_STOP_POLL_SECONDS)
    wake.wait_until(
        turn=turn.pk,
        types=WAKES,
        done=ended,
        timeout=settings.AGENT_APPROVAL_SECONDS,
        poll=poll,
    )
    if seen:
        return seen[-1]
    if turn_approval_expire(turn=turn, pending=pending):
        _took_answer(turn)
        return Outcome(False, "timed_out")
    # It ended otherwise just as the time ran out: read how.
    return _read_answer(run, pending) or Outcome(False, "lost")


def _read_answer(run: TurnRun, pending: Pending) -> Outcome | None:
    """How the wait stands, from the turn's row: None while it still waits."""
    turn = run.turn
    row = Turn.objects.filter(pk=turn.pk).values_list("status", "attempts", "metadata").first()
    if row is None:
        run.beat.lost = True
        return Outcome(False, "lost")
    status, attempts, metadata = row
    if status == Turn.Status.CANCELLED and attempts == turn.attempts:
        run.beat.cancelled = run.beat.lost = True
        return Outcome(False, "cancelled")
    if attempts != turn.attempts or status not in HELD:
        run.beat.lost = True
        return Outcome(False, "lost")
    answer = answer_for(metadata, pending)  # this very call's, of this attempt: never another's
    if answer is None:
        return None
    # The answer is on the row: from now on the worker's copy of the metadata carries it, so
    # the turn's end (which writes the metadata the worker holds) keeps it.
    turn.metadata = metadata
    turn.status = Turn.Status.RUNNING
    turn.pending_approval = None
    return Outcome(bool(answer["approved"]), str(answer["reason"]))


def _took_answer(turn: Turn) -> None:
    fresh = Turn.objects.filter(pk=turn.pk).values_list("metadata", flat=True).first()
    if isinstance(fresh, dict):
        turn.metadata = fresh
    turn.status = Turn.Status.RUNNING
    turn.pending_approval = None
