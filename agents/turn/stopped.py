"""A stopped turn's calls as messages to keep (`stopped_messages`): what the stream saw of each
call (agents.turn.stream, `Streamed.calls`) as the assistant's tool-call messages and the tool
messages of the calls that answered, for sessions_app.turns.turn_keep_stopped. A call that did
not run (it waited for approval when the turn was stopped, or its owner refused it) gets no tool
message: the model's history says it did not run (agents.history)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sessions_app.turns import NewMessage, UnstoredCall

from ..tools import DEFAULT_EFFECT


@dataclass(frozen=True)
class Calls:
    """What the stream saw of a stopped turn's calls, and what the agent knows of its tools."""

    seen: Iterable[UnstoredCall]  # Streamed.calls' values, in order
    was_refused: Callable[[str, object], bool]  # the approval gate's
    effects: Mapping[str, str]  # the agent's tool_effects
    model: str


def stopped_messages(calls: Calls) -> tuple[list[NewMessage], set[str]]:
    """The messages of the calls the stream saw, in order, and the ids of those that started
    and never answered (they may have run). The calls go in one assistant message, a new one
    after the tool messages so far whenever an id repeats (model servers repeat ids)."""
    out: list[NewMessage] = []
    may_have_run: set[str] = set()
    asked: NewMessage | None = None
    answers: list[NewMessage] = []
    for i, call in enumerate(calls.seen):
        call_id = call.call_id or f"call_stopped_{i}"
        if asked is None or any(c["id"] == call_id for c in asked.tool_calls):
            out.extend(answers)
            asked = NewMessage(role="assistant", tool_calls=[], metadata={"model": calls.model})
            answers = []
            out.append(asked)
        asked.tool_calls.append(_as_call(call_id, call))
        answer = _answer(calls, call_id, call)
        if answer is not None:
            answers.append(answer)
        elif call.result is None:
            may_have_run.add(call_id)
    out.extend(answers)
    return out, may_have_run


def _as_call(call_id: str, call: UnstoredCall) -> dict[str, object]:
    args = json.dumps(call.args if call.args is not None else {}, default=str)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": call.tool_name, "arguments": args},
    }


def _answer(calls: Calls, call_id: str, call: UnstoredCall) -> NewMessage | None:
    """The call's tool message, or None: it never answered, or it did not run (refused, or
    stopped while it waited for approval)."""
    if call.result is None or calls.was_refused(call_id, call.args):
        return None
    return NewMessage(
        role="tool",
        content=call.result,
        tool_name=call.tool_name,
        tool_args=call.args,
        tool_result=call.result,
        tool_call_id=call_id,
        metadata={"error": True} if call.error else {},
        effect=calls.effects.get(call.tool_name, DEFAULT_EFFECT),
    )
