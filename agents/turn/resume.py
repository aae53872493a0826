"""A paused turn's continuation: the messages agno runs on, and the saved batch replayed.

The continuation asks agno for a run on the branch's history, the turn's user message, the
turn's messages saved before the batch that paused, and then, in place of the model's first
answer, the saved assistant message of that batch (its text and tool calls): agno runs the batch
through the tool hooks as if the model had just sent it (agents.approval_gate gives the calls
that already ran their saved results), and asks the model for what follows. The whole turn's
messages come back in the run's output, so the store step keeps them as one turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agno.models.base import Model
from agno.models.message import Message as AgnoMessage
from agno.models.response import ToolExecution
from agno.run.agent import RunOutput

from ..mcp.vision import MEDIA_NOTE, agno_image, stored_images

if TYPE_CHECKING:
    from agno.media import Image

FIELDS = ("role", "content", "tool_calls", "tool_call_id", "tool_name", "tool_args")


def resumed_input(
    messages: list[AgnoMessage], state: dict[str, Any], *, images: bool = False
) -> list[AgnoMessage]:
    """The fitted messages (history and user message) and the turn's saved earlier messages;
    with `images` (a model that sees them: agents.mcp.vision), each earlier batch's tool images
    after its results, as agno gave them to the model the first time."""
    out = [*messages]
    media: list[Image] = []
    for m in state.get("messages") or []:
        if not isinstance(m, dict) or m.get("role") not in ("assistant", "tool"):
            continue
        if m["role"] != "tool":
            _carry(out, media)
        out.append(AgnoMessage.model_validate({k: m.get(k) for k in (*FIELDS, "tool_call_error")}))
        if images and m["role"] == "tool":
            media += [i for i in (agno_image(s) for s in stored_images(m)) if i is not None]
    _carry(out, media)
    return out


def _carry(out: list[AgnoMessage], media: list[Image]) -> None:
    if media:
        # agno's carrier (agents.mcp.vision): never stored, never saved by a later pause
        out.append(
            AgnoMessage(
                role="user", content=MEDIA_NOTE, images=list(media), add_to_agent_memory=False
            )
        )
        media.clear()


def replay_batch(model: Model | None, state: dict[str, Any]) -> None:
    """The model's next answer is the saved batch, once, without a request: agno's streamed
    response step (`process_response_stream`) is replaced on this model instance for one call;
    the instance is this turn's own (built per turn), and the next call asks the model again."""
    assistant = state.get("assistant")
    if model is None or not isinstance(assistant, dict):
        return

    def replayed(*, assistant_message: AgnoMessage, **_: Any) -> Iterator[Any]:
        del model.process_response_stream  # the class's own again
        assistant_message.content = assistant.get("content")
        assistant_message.tool_calls = list(assistant.get("tool_calls") or [])
        return iter(())

    model.process_response_stream = replayed  # type: ignore[assignment,method-assign]


def count_saved_calls(output: RunOutput | None, state: dict[str, Any]) -> None:
    """The calls the turn's earlier continuations ran (its saved messages' tool results) join
    the run's tools, as the calls this attempt ran do: the turn's `tools_used` and its stored
    tool messages count them (agents.turn.store reads `output.tools`); their images join the
    run's, so each is stored with the result that names it (`output.images`)."""
    if output is None:
        return
    carried = [
        image
        for m in state.get("messages") or []
        if isinstance(m, dict) and m.get("role") == "tool"
        for image in (agno_image(s) for s in stored_images(m))
        if image is not None
    ]
    if carried:
        output.images = [*(output.images or []), *carried]
    saved = [
        ToolExecution(
            tool_call_id=m.get("tool_call_id"),
            tool_name=m.get("tool_name"),
            tool_args=m.get("tool_args"),
            result=m.get("content"),
            tool_call_error=bool(m.get("tool_call_error")),
        )
        for m in state.get("messages") or []
        if isinstance(m, dict) and m.get("role") == "tool"
    ]
    if saved:
        output.tools = [*saved, *(output.tools or [])]
