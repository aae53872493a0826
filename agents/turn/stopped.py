"""A stopped turn's calls as messages to keep (`stopped_messages`): what the stream saw of each
call (agents.turn.stream, `Streamed.calls`) as the assistant's tool-call messages and the tool
messages of the calls that answered (with their images), for sessions_app.turns.
turn_keep_stopped. A call that did not run (it waited for approval when the turn was stopped,
or its owner refused it) gets no tool message: the model's history says it did not run
(agents.history). A continuation's stream never sees the batches before its pause (they ran in
earlier attempts): their messages come from the saved pause (`earlier_messages`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sessions_app.turns import NewMessage, UnstoredCall
from sessions_app.turns.paused import saved_new_messages

from ..tools import DEFAULT_EFFECT


@dataclass(frozen=True)
class Calls:
    """What the stream saw of a stopped turn's calls, and what the agent knows of its tools."""

    seen: Iterable[UnstoredCall]  # Streamed.calls' values, in order
    was_refused: Callable[[str, object], bool]  # the approval gate's
    effects: Mapping[str, str]  # the agent's tool_effects
    model: str
    images_of: Callable[[str, object], list[dict[str, object]]]  # the attempt's (TurnState)


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
    metadata: dict[str, object] = {"error": True} if call.error else {}
    images = calls.images_of(call_id, call.args)
    if images and not call.error:
        metadata["images"] = images
    return NewMessage(
        role="tool",
        content=call.result,
        tool_name=call.tool_name,
        tool_args=call.args,
        tool_result=call.result,
        tool_call_id=call_id,
        metadata=metadata,
        effect=calls.effects.get(call.tool_name, DEFAULT_EFFECT),
    )


def earlier_messages(resumed: dict[str, Any] | None) -> list[NewMessage]:
    """A continuation's turn (`resumed`: its saved pause): the messages of the batches before
    the one that paused, as the pause saved them; none for a turn that never paused."""
    return saved_new_messages(resumed, batch=False) if resumed else []


def earlier_external_calls(resumed: dict[str, Any] | None) -> list[UnstoredCall]:
    """The external calls among `earlier_messages`, as the ledger records a call stored
    nowhere (a refused one has effect `none`: it did not run)."""
    return [
        UnstoredCall(
            m.tool_name,
            m.tool_args,
            None if m.metadata.get("may_have_run") else m.tool_result,
            bool(m.metadata.get("error")),
            call_id=m.tool_call_id,
        )
        for m in earlier_messages(resumed)
        if m.role == "tool" and m.effect == "external"
    ]
