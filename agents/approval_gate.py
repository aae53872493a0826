"""Tool calls that wait for their owner's approval before they run, holding no thread.

Every call of a `RollbackAgent` passes through `ApprovalGate.hook`, an agno tool hook; those of
the tools in the turn's `tool_approvals` (the agent's, and its MCP tools': agents.turn_state.
TurnState) wait. The stream step announces each call's id and arguments as agno starts it
(`RunCalls.announce`, in the attempt's state); the hook takes them.

A call that needs approval and has no answer yet PAUSES the turn: the hook saves the attempt's
state on the turn's row (`turn_await_approval`, with what `TurnState.pause` says is saved and
`sessions_app.turns.paused.paused_state` reads back: the turn's messages before this batch, the
batch's assistant message with its tool calls, the results of the batch's calls that already
ran, each tool's effect, the session state, the call that waits), raises agno's
`StopAgentRun`, and the stream step closes agno's run before anything else of the batch runs.
The attempt ends; the worker is free.

The owner's answer (or the recovery job's time-out) queues the turn again; its continuation is
a new attempt (agents.turn.resume): agno runs again on the history, the turn's saved messages
and, instead of asking the model, the saved batch (the model's response replayed), so the batch
goes through this hook again: a call that already ran gets its saved result without running
(`RunCalls.replayed`), the answered call runs (recorded as started first:
`turn_call_started`) or gets the refusal text, and the calls after it run (or pause again). A
call recorded as started whose continuation died is never run again: the model is told it may
have run, and it is on record (`metadata.may_have_run`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

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
    turn_await_approval,
)
from sessions_app.turns.paused import turn_call_started, turn_note_may_have_run

from .mcp.vision import agno_image, images_of_result, stored_images

if TYPE_CHECKING:
    from .turn_state import Announced, RunCalls, TurnState

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


class ApprovalGate:
    """One agent's gate: the names of its own tools that wait (the agent's `tool_approvals`,
    shared, so a name added later counts), and how to find the attempt whose calls it asks
    about (`state_of`: the agent's `turn_state`, whose `tool_approvals` add the turn's MCP
    tools). What it learns of a turn's calls (announced, ran, refused, paused) is that
    attempt's (agents.turn_state): the gate itself keeps nothing of a turn."""

    def __init__(self, names: set[str], state_of: Callable[[], TurnState | None]) -> None:
        self.names = names
        self.state_of = state_of

    def hook(
        self,
        function_name: str,
        function_call: Callable[..., Any],
        arguments: dict[str, Any],
        run_context: Any = None,
    ) -> Any:
        """agno's tool hook around every call: runs the tool at once when it needs no approval,
        else only once its owner approved this very call; pauses the turn when nobody has."""
        state = self.state_of()
        if state is None:  # an agno run outside a turn: nobody to ask
            if function_name in self.names:
                raise ApprovalRefused(
                    f"{function_name} needs its owner's approval, and no turn is there to ask "
                    "it in."
                )
            return function_call(**arguments)
        calls = state.calls
        seen = calls.take(function_name, arguments)
        if state.paused:  # the turn paused at an earlier call of this batch: nothing more runs
            raise StopAgentRun(PAUSED.format(tool=function_name))
        key = result_key(seen.call_id, seen.args)
        saved = calls.replayed.pop(key, None)
        if saved is None or len(saved) < 2:
            if function_name in state.tool_approvals:
                _ask(state, function_name, seen, run_context)
            result = _call(calls, seen, function_call, arguments)
            saved = calls.results[key]
        elif saved[1]:  # it ran before the pause, and failed: not again
            raise ApprovalRefused(str(saved[0]))
        else:  # it ran before the pause: not again
            result = _replayed(saved)
        # Its images, for what a later pause saves and a Stop keeps (agents.turn_state).
        state.note_images(seen.call_id, seen.args, _images(saved))
        return result


def _call(
    calls: RunCalls, seen: Announced, function_call: Callable[..., Any], arguments: Any
) -> Any:
    key = result_key(seen.call_id, seen.args)
    try:
        result = function_call(**arguments)
    except Exception as exc:
        calls.results[key] = [str(exc), True]
        raise
    calls.results[key] = _saved(result)
    return result


def _saved(result: Any) -> list[Any]:
    """A call's result as a pause saves it: [text, False], and an MCP tool's images (agno's
    ToolResult) as its message stores them: [text, False, images]."""
    from agno.tools.function import ToolResult

    if isinstance(result, ToolResult):
        images = images_of_result(result.content, result.images)
        return [result.content, False, images] if images else [result.content, False]
    return [result if isinstance(result, str) else str(result), False]


def _images(saved: list[Any]) -> list[dict[str, Any]]:
    """The images of a saved result ([text, error, images]), as a tool message stores them."""
    return stored_images({"images": saved[2]}) if len(saved) > 2 else []


def _replayed(saved: list[Any]) -> Any:
    """What a call that ran before the pause gives its continuation: its saved text, with its
    images again (agno then gives them to the model and the store keeps them)."""
    carried = [i for i in (agno_image(s) for s in _images(saved)) if i]
    if not carried:
        return saved[0]
    from agno.tools.function import ToolResult

    return ToolResult(content=str(saved[0]), images=carried)


def _ask(state: TurnState, function_name: str, seen: Announced, run_context: Any) -> None:
    """Returns when the call may run; raises when it may not, or pauses the turn."""
    digest = args_digest(seen.args)
    resuming = state.calls.resuming
    if (
        resuming is not None
        and (resuming["tool_call_id"], resuming["tool_name"]) == (seen.call_id, function_name)
        and resuming["args_sha256"] == digest
    ):
        state.calls.resuming = None
        _answered(state, resuming, seen)
        return
    state.approval_calls += 1  # its place among the turn's calls that waited
    pending = pending_call(
        turn=state.turn,
        call=state.approval_calls,
        tool_call_id=seen.call_id,
        tool_name=function_name,
        args=seen.args,
    )
    if not turn_await_approval(turn=state.turn, pending=pending, paused=state.pause(run_context)):
        state.hold.check_cancelled()
        state.hold.lost = True
        raise ApprovalRefused(STOPPED.format(tool=function_name))
    log.info("turn %s: %s (%s) waits for approval", state.turn.pk, function_name, seen.call_id)
    state.paused = True
    raise StopAgentRun(PAUSED.format(tool=function_name))


def _answered(state: TurnState, pending: Pending, seen: Announced) -> None:
    turn = state.turn
    key = call_key(pending["attempt"], pending["call"])
    if state.calls.started == key:  # a continuation began it and died: never run again unasked
        turn_note_may_have_run(turn=turn, pending=pending)
        state.refused.add((seen.call_id, pending["args_sha256"]))
        raise ApprovalRefused(MAY_HAVE_RUN_NOTE.format(attempt=pending["attempt"]))
    answer = answer_for(turn.metadata, pending)
    reason = str(answer["reason"]) if answer is not None else "lost"
    log.info("turn %s: %s (%s) %s", turn.pk, seen.call_id, key, reason)
    if answer is not None and answer["approved"]:
        if turn_call_started(turn=turn, key=key):
            return
        reason = "lost"
    state.refused.add((seen.call_id, pending["args_sha256"]))
    raise ApprovalRefused(refusal_text(pending["tool_name"], reason))


def refusal_text(tool: str, reason: str) -> str:
    if reason == "refused":
        return REFUSED.format(tool=tool)
    if reason == "timed_out":
        return TIMED_OUT.format(tool=tool, seconds=settings.AGENT_APPROVAL_SECONDS)
    return STOPPED.format(tool=tool)
