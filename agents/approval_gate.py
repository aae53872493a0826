"""Tool calls that wait for their owner's approval before they run, holding no thread.

The agent's tools whose names are in `RollbackAgent.tool_approvals` pass through
`ApprovalGate.hook`, an agno tool hook that wraps every call. The stream step announces each
call's id and arguments as agno starts it (`announce`); the hook takes them.

A call that needs approval and has no answer yet PAUSES the turn: the hook saves the run's
state on the turn's row (`turn_await_approval`, with the state `sessions_app.approvals.
paused_state` describes: the turn's messages before this batch, the batch's assistant message
with its tool calls, the results of the batch's calls that already ran, the call that waits),
raises agno's `StopAgentRun`, and the stream step closes agno's run before anything else of the
batch runs. The attempt ends; the worker is free.

The owner's answer (or the recovery job's time-out) queues the turn again; its continuation is
a new attempt (agents.turn.resume): agno runs again on the history, the turn's saved messages
and, instead of asking the model, the saved batch (the model's response replayed), so the batch
goes through this hook again: a call that already ran gets its saved result without running
(`replayed`), the answered call runs (recorded as started first: `turn_call_started`) or gets
the refusal text, and the calls after it run (or pause again). A call recorded as started whose
continuation died is never run again: the model is told it may have run, and it is on record
(`metadata.may_have_run`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from agno.exceptions import AgentRunException, StopAgentRun
from django.conf import settings

from sessions_app.approvals import (
    MAY_HAVE_RUN_NOTE,
    Pending,
    answer_for,
    args_digest,
    call_key,
    pending_call,
    result_key,
    tool_call_key,
    turn_await_approval,
)
from sessions_app.turns.paused import turn_call_started, turn_note_may_have_run

from .mcp.vision import agno_image, images_of_result, stored_images

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
PAUSED = "This call of {tool} waits for its owner's approval; the turn is paused."


class ApprovalRefused(AgentRunException):
    """Raised by the hook instead of running the tool: agno gives the model its text as the
    call's result, marked as an error (so the call is not among the turn's `tools_used`). An
    AgentRunException, which agno takes as the tool's own way to answer: a plain exception would
    be logged as a crash with its traceback, and a refusal is no crash."""


@dataclass(frozen=True)
class Announced:
    """A call the stream saw start: its id and the model's own arguments."""

    call_id: str
    args: dict[str, Any]


class ApprovalGate:
    """One agent's gate: the names of its tools that wait (the agent's own set, shared, so a
    name added later counts), the run it belongs to while a turn runs, the calls the stream
    announced and the hook has not taken yet, and what a pause saves."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.run: TurnRun | None = None
        self._announced: dict[str, list[Announced]] = {}
        # The calls it refused (the owner refused, or no answer came in time), by id and the
        # hash of their arguments (ids repeat): they did not run, so their tool messages record
        # no effect (agents.turn.store).
        self.refused: set[tuple[str, str]] = set()
        # This run's calls that ran, by id: [result, error] (saved when the turn pauses).
        self.results: dict[str, list[Any]] = {}
        # A continuation's saved results of the batch it replays, and the answered call.
        self.replayed: dict[str, list[Any]] = {}
        self.resuming: Pending | None = None
        self.started: str | None = None
        # The replayed calls whose start (and, with a saved result, whose end) the attempt that
        # paused already announced: a continuation does not announce them again.
        self._told_started: set[str] = set()
        self._told_finished: set[str] = set()
        self.paused = False

    def begin(self, run: TurnRun | None) -> None:
        """The turn whose calls this gate asks about (None once its stream ended)."""
        self.run = run
        self._announced.clear()
        if run is not None:
            self.paused = False
            self.results.clear()
            if run.approval_calls == 0:
                self.refused.clear()

    def resume(self, state: dict[str, Any] | None) -> None:
        """A continuation: the saved results of the batch it replays and the call answered."""
        self.replayed, self.resuming, self.started = {}, None, None
        self._told_started, self._told_finished = set(), set()
        if state is None:
            return
        results = state.get("results")
        self.replayed = {k: v for k, v in (results or {}).items() if isinstance(v, list)}
        pending = state.get("pending")
        self.resuming = cast("Pending", pending) if isinstance(pending, dict) else None
        if self.resuming is not None and self.run is not None:
            # The turn's calls that waited keep their numbers across its continuations.
            self.run.approval_calls = max(self.run.approval_calls, int(self.resuming["call"]))
        started = state.get("started")
        self.started = started if isinstance(started, str) else None

    def announce(self, tool_name: str | None, call_id: str | None, args: object = None) -> None:
        """The stream saw ToolCallStarted for this call: its tool runs next, on this thread."""
        if tool_name and call_id:
            given = dict(args) if isinstance(args, dict) else {}
            self._announced.setdefault(tool_name, []).append(Announced(call_id, given))
            key = result_key(call_id, given)
            resuming = self.resuming
            if key in self.replayed:  # it ran before the pause: its start and end were told
                self._told_started.add(key)
                self._told_finished.add(key)
            elif (
                resuming is not None
                and (resuming["tool_call_id"], resuming["tool_name"]) == (call_id, tool_name)
                and resuming["args_sha256"] == args_digest(given)
            ):
                self._told_started.add(key)  # the call that waited: its start was told

    def already_told(self, call_id: str | None, args: object, *, finished: bool) -> bool:
        """Whether the attempt that paused already sent this event of a replayed call
        (`tool.started`, or with `finished` `tool.finished`): once is what the pages and the
        API's clients hear of each call. Each answers once (ids repeat)."""
        if not call_id:
            return False
        told = self._told_finished if finished else self._told_started
        key = result_key(call_id, dict(args) if isinstance(args, dict) else {})
        if key not in told:
            return False
        told.discard(key)
        return True

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
        run_context: Any = None,
    ) -> Any:
        """agno's tool hook around every call: runs the tool at once when it needs no approval,
        else only once its owner approved this very call; pauses the turn when nobody has."""
        seen = self._take(function_name, arguments)
        if self.paused:  # the turn paused at an earlier call of this batch: nothing more runs
            raise StopAgentRun(PAUSED.format(tool=function_name))
        saved = self.replayed.pop(result_key(seen.call_id, seen.args), None)
        if saved is not None and len(saved) >= 2:  # it ran before the pause: not again
            if saved[1]:
                raise ApprovalRefused(str(saved[0]))
            return _replayed(saved)
        if function_name in self.names:
            self._ask(function_name, seen, run_context)
        return self._call(seen, function_call, arguments)

    def _call(self, seen: Announced, function_call: Callable[..., Any], arguments: Any) -> Any:
        key = result_key(seen.call_id, seen.args)
        try:
            result = function_call(**arguments)
        except Exception as exc:
            self.results[key] = [str(exc), True]
            raise
        self.results[key] = _saved(result)
        return result

    def _ask(self, function_name: str, seen: Announced, run_context: Any) -> None:
        """Returns when the call may run; raises when it may not, or pauses the turn."""
        run = self.run
        if run is None:
            raise ApprovalRefused(
                f"{function_name} needs its owner's approval, and no turn is there to ask it in."
            )
        digest = args_digest(seen.args)
        resuming = self.resuming
        if (
            resuming is not None
            and (resuming["tool_call_id"], resuming["tool_name"])
            == (
                seen.call_id,
                function_name,
            )
            and resuming["args_sha256"] == digest
        ):
            self.resuming = None
            self._answered(run, resuming, seen)
            return
        run.approval_calls += 1  # its place among this attempt's calls that waited
        pending = pending_call(
            turn=run.turn,
            call=run.approval_calls,
            tool_call_id=seen.call_id,
            tool_name=function_name,
            args=seen.args,
        )
        state = saved_state(run_context, self.results)
        # Each tool's effect, so a Stop of the paused turn stores its calls as they are
        # (sessions_app.turns.paused.paused_new_messages), with no agent at hand.
        state["effects"] = dict(getattr(run.agent, "tool_effects", None) or {})
        if not turn_await_approval(turn=run.turn, pending=pending, paused=state):
            run.beat.check_cancelled()
            run.beat.lost = True
            raise ApprovalRefused(STOPPED.format(tool=function_name))
        log.info("turn %s: %s (%s) waits for approval", run.turn.pk, function_name, seen.call_id)
        self.paused = True
        raise StopAgentRun(PAUSED.format(tool=function_name))

    def _answered(self, run: TurnRun, pending: Pending, seen: Announced) -> None:
        key = call_key(pending["attempt"], pending["call"])
        if self.started == key:  # a continuation began it and died: never run again unasked
            turn_note_may_have_run(turn=run.turn, pending=pending)
            self.refused.add((seen.call_id, pending["args_sha256"]))
            raise ApprovalRefused(MAY_HAVE_RUN_NOTE.format(attempt=pending["attempt"]))
        answer = answer_for(run.turn.metadata, pending)
        reason = str(answer["reason"]) if answer is not None else "lost"
        log.info("turn %s: %s (%s) %s", run.turn.pk, seen.call_id, key, reason)
        if answer is not None and answer["approved"]:
            if turn_call_started(turn=run.turn, key=key):
                return
            reason = "lost"
        self.refused.add((seen.call_id, pending["args_sha256"]))
        raise ApprovalRefused(refusal_text(pending["tool_name"], reason))


def _saved(result: Any) -> list[Any]:
    """A call's result as a pause saves it: [text, False], and an MCP tool's images (agno's
    ToolResult) as its message stores them: [text, False, images]."""
    from agno.tools.function import ToolResult

    if isinstance(result, ToolResult):
        images = images_of_result(result.content, result.images)
        return [result.content, False, images] if images else [result.content, False]
    return [result if isinstance(result, str) else str(result), False]


def _replayed(saved: list[Any]) -> Any:
    """What a call that ran before the pause gives its continuation: its saved text, with its
    images again (agno then gives them to the model and the store keeps them)."""
    images = saved[2] if len(saved) > 2 and isinstance(saved[2], list) else []
    carried = [i for i in (agno_image(s) for s in stored_images({"images": images})) if i]
    if not carried:
        return saved[0]
    from agno.tools.function import ToolResult

    return ToolResult(content=str(saved[0]), images=carried)


def saved_state(run_context: Any, results: dict[str, list[Any]]) -> dict[str, Any]:
    """What a pause saves of agno's run (its live messages, from the hook's run context): the
    turn's new messages before the batch, the batch's assistant message, its calls that ran."""
    messages = list(getattr(run_context, "messages", None) or [])
    new = [
        m
        for m in messages
        if m.role not in ("system", "developer") and m.add_to_agent_memory and not m.from_history
    ]
    if new and new[0].role == "user":
        new = new[1:]  # the turn's own message, stored when it started
    assistant = new.pop() if new and new[-1].role == "assistant" else None
    calls = [c for c in (assistant.tool_calls or []) if isinstance(c, dict)] if assistant else []
    keys = {tool_call_key(c) for c in calls}
    return {
        "messages": [message_dict(m) for m in new],
        "assistant": {"content": _text(assistant.content), "tool_calls": calls}
        if assistant
        else None,
        "results": {k: v for k, v in results.items() if k in keys},
    }


def message_dict(m: Any) -> dict[str, Any]:
    return {
        "role": m.role,
        "content": _text(m.content),
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id,
        "tool_name": m.tool_name,
        "tool_args": m.tool_args,
        "tool_call_error": m.tool_call_error,
    }


def _text(content: Any) -> str | None:
    return content if content is None or isinstance(content, str) else str(content)


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
