"""Between our Message rows and agno's messages.

The model gets exactly the branch's history: user and assistant messages, assistant tool calls and
their tool results. A history that would break the protocol (a tool call without its result, or a
result without its call, as an imported document might hold) is repaired on the way out so the
model server never refuses it, and so is a user message that follows another one (a failed turn
leaves its user message without an answer): `alternate` joins them into one, because the chat
templates of many models accept only alternating roles.

A stopped turn is never joined to the next: it always ends in an assistant message marked stopped
(sessions_app.turns.stopped, empty when nothing was said), to which the model's input adds a note
that the user stopped it, what ran and what did not (`stopped_note`); its calls that never
answered get a result saying they did not run (or may have run). Both are built here, never
stored: the stored rows stay what happened.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from agno.metrics import MessageMetrics
from agno.models.message import Message as AgnoMessage

from sessions_app.models import Message
from sessions_app.turns import NewMessage, stopped_line, without_cut_note

from .markers import CONTINUE_MARKER
from .mcp.vision import MEDIA_NOTE, agno_image, images_of_result, stored_images
from .tools import DEFAULT_EFFECT

# What the model gets for a stopped turn's call that never answered (built, never stored).
NOT_RUN = "Not run: the user stopped the turn before this call of {tool} ran."
MAY_HAVE_RUN = (
    "No answer: the user stopped the turn while this call of {tool} was running; it may have run."
)
# The note after a stopped turn, so the next message is not taken as a repeat of it.
STOPPED_NOTE = (
    "[The user stopped this turn before it was finished{calls}. Do not redo the stopped request "
    "unless the user asks for it again.]"
)

# What a turn that continues a cut-off reply (sessions_app.turns.turn_continue) asks after the
# history that ends with that reply. Sent, never stored: the conversation shows the reply
# extended, not a request to extend it.
CONTINUE_INSTRUCTION = (
    f"{CONTINUE_MARKER} before it was finished. Continue it exactly where it stopped, from the "
    "next character: do not repeat anything you already wrote, do not start over, and do not "
    "comment on the interruption."
)


def to_agno(messages: list[Message], *, images: int = 0) -> list[AgnoMessage]:
    """The stored history as agno messages, none of which agno echoes back as new. The last
    `images` images of tool results ride again in a user message after their tool messages,
    as agno sends them in the turn that got them (agents.mcp.vision)."""
    out: list[AgnoMessage] = []
    pending = _Pending()
    replayed = _replayed(messages, images)
    media: list[Any] = []
    for m in messages:
        if m.role == Message.Role.TOOL:
            if not pending.answer(m.tool_call_id):
                continue  # a result whose call is not in the history
            media += [agno_image(i) for i in stored_images(m.metadata) if i["id"] in replayed]
            out.append(
                AgnoMessage(
                    role="tool",
                    content=m.tool_result or m.content,
                    tool_call_id=m.tool_call_id,
                    tool_name=m.tool_name or None,
                    add_to_agent_memory=False,
                )
            )
            continue
        pending.close(out)  # before the images: tool results follow their call at once
        _add_media(out, media)
        if m.role == Message.Role.ASSISTANT and m.tool_calls:
            calls = [c for c in m.tool_calls if isinstance(c, dict) and c.get("id")]
            pending.open(calls, m.metadata)
            out.append(
                AgnoMessage(
                    role="assistant",
                    content=m.content or None,
                    tool_calls=calls or None,
                    add_to_agent_memory=False,
                )
            )
            continue
        if _continues(m, out):  # the rest of a cut-off reply: one reply for the model
            before = out[-1]
            before.content = without_cut_note(str(before.content)) + m.content
        else:
            out.append(AgnoMessage(role=m.role, content=m.content, add_to_agent_memory=False))
        note = stopped_note(m.metadata) if m.role == Message.Role.ASSISTANT else ""
        if note:  # built here, never stored: the stored reply stays what was said
            said = str(out[-1].content or "")
            out[-1].content = f"{said}\n\n{note}" if said.strip() else note
    pending.close(out)
    _add_media(out, media)
    history = alternate(out)
    for message in history:
        message.metrics = StoredMetrics()
    return history


class StoredMetrics(MessageMetrics):
    """The metrics of a message of the stored history, as agno holds it for a run: none measured
    (agno measures the run's new messages, in metrics of their own). At each run's end agno
    serialises the run's whole input (`RunInput.input_content_string`, made for a file it writes
    only when asked to, which is never here): each message's metrics through
    `dataclasses.asdict`, which deep-copies them. That was about 17 µs a message at every turn
    (3.4 ms for a history of 200). The same dictionary, from the fields as they are."""

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: value
            for f in fields(self)
            if f.name != "timer"
            and (value := getattr(self, f.name)) is not None
            and (not isinstance(value, int) or value != 0)
            and (not isinstance(value, dict) or len(value) > 0)
        }


class _Pending:
    """The calls of the last assistant message still waiting for their results. Those of a
    stopped turn (marked `stopped_turn` by sessions_app.turns.turn_keep_stopped) that never
    answered get a result saying so; any other call without a result is removed."""

    def __init__(self) -> None:
        self.calls: dict[str, str] = {}  # id: tool
        self.stopped = False
        self.may_have_run: set[str] = set()

    def open(self, calls: list[dict[str, Any]], metadata: Any) -> None:
        self.calls = {c["id"]: _call_name(c) for c in calls}
        metadata = metadata if isinstance(metadata, dict) else {}
        self.stopped = bool(metadata.get("stopped_turn"))
        started = metadata.get("may_have_run")
        self.may_have_run = {str(i) for i in started} if isinstance(started, list) else set()

    def answer(self, call_id: str) -> bool:
        return self.calls.pop(call_id, None) is not None

    def close(self, out: list[AgnoMessage]) -> None:
        if self.stopped:
            for call_id, tool in self.calls.items():
                text = MAY_HAVE_RUN if call_id in self.may_have_run else NOT_RUN
                out.append(
                    AgnoMessage(
                        role="tool",
                        content=text.format(tool=tool or "the tool"),
                        tool_call_id=call_id,
                        tool_name=tool or None,
                        add_to_agent_memory=False,
                    )
                )
            self.calls.clear()
        _drop_unanswered(out, set(self.calls))
        self.calls.clear()


def _call_name(call: dict[str, Any]) -> str:
    fn = call.get("function")
    return str(fn.get("name") or "") if isinstance(fn, dict) else ""


def stopped_note(metadata: Any) -> str:
    """What the model is told after a stopped turn (its reply, marked stopped): the user stopped
    it, what ran and what did not, and not to redo it unasked. Empty for any other message."""
    line = stopped_line(metadata)
    if not line and not (isinstance(metadata, dict) and metadata.get("stopped")):
        return ""
    done = line.removeprefix("Stopped: ") if line.startswith("Stopped: ") else ""
    return STOPPED_NOTE.format(calls=f" ({done})" if done else "")


def _replayed(messages: list[Message], count: int) -> set[str]:
    """The ids of the last `count` images the history's tool messages hold."""
    ids: list[str] = []
    for m in reversed(messages):
        if len(ids) >= count:
            break
        if m.role == Message.Role.TOOL:
            ids += [i["id"] for i in reversed(stored_images(m.metadata))]
    return set(ids[:count])


def _add_media(out: list[AgnoMessage], media: list[Any]) -> None:
    """The images of the tool results just added, in one user message after them."""
    images = [image for image in media if image is not None]
    media.clear()
    if images:
        out.append(
            AgnoMessage(role="user", content=MEDIA_NOTE, images=images, add_to_agent_memory=False)
        )


def _continues(m: Message, out: list[AgnoMessage]) -> bool:
    """Whether `m` extends the reply just before it (a Continue, marked "continues")."""
    metadata = m.metadata if isinstance(m.metadata, dict) else {}
    before = out[-1] if out else None
    return (
        m.role == Message.Role.ASSISTANT
        and "continues" in metadata
        and before is not None
        and before.role == "assistant"
        and not before.tool_calls
        and isinstance(before.content, str)
    )


def continuation_request(history: list[AgnoMessage]) -> list[AgnoMessage]:
    """The messages of a turn that continues the reply ending `history`: that reply without the
    note that marks it cut off, then CONTINUE_INSTRUCTION (sent only, never stored)."""
    last = history[-1] if history else None
    if last is not None and last.role == "assistant" and isinstance(last.content, str):
        last.content = without_cut_note(last.content)
    return [*history, AgnoMessage(role="user", content=CONTINUE_INSTRUCTION)]


def alternate(messages: list[AgnoMessage]) -> list[AgnoMessage]:
    """`messages` with each run of consecutive user messages joined into one (their texts
    separated by a blank line), so no two user messages follow each other. The joined message
    is the last of its run, keeping that one's flags: the turn's own new message stays new."""
    out: list[AgnoMessage] = []
    for m in messages:
        before = out[-1] if out else None
        if (
            before is not None
            and m.role == "user"
            and before.role == "user"
            and isinstance(m.content, str)
            and isinstance(before.content, str)
        ):
            m.content = "\n\n".join(part for part in (before.content, m.content) if part)
            out[-1] = m
            continue
        out.append(m)
    return out


def _drop_unanswered(out: list[AgnoMessage], pending: set[str]) -> None:
    """Remove tool calls that got no result from the last assistant message that made them."""
    if not pending:
        return
    for message in reversed(out):
        if message.role == "assistant" and message.tool_calls:
            message.tool_calls = [c for c in message.tool_calls if c.get("id") not in pending]
            if not message.tool_calls:
                message.tool_calls = None
                if not message.content:
                    message.content = ""
            break
    pending.clear()


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    try:
        return json.dumps(content)
    except (TypeError, ValueError):
        return str(content)


def _metrics(message: AgnoMessage) -> dict[str, Any]:
    metrics = getattr(message, "metrics", None)
    if metrics is None:
        return {}
    out: dict[str, Any] = {}
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        value = getattr(metrics, key, None)
        if value:
            out[key] = value
    duration = getattr(metrics, "duration", None)
    if duration:
        out["latency_ms"] = round(duration * 1000)
    return out


def from_agno(
    messages: list[AgnoMessage],
    *,
    model: str,
    ran: set[str] | None = None,
    effects: Mapping[str, str] | None = None,
    images: list[Any] | None = None,
) -> list[NewMessage]:
    """The messages a run added after the user's message, ready to store. A tool result is
    marked {"error": true} when its tool did not run: it raised (agno's `tool_call_error`), or
    its call id is not in `ran`, the calls that ran (agno answers a call to an unknown tool,
    with arguments that are not JSON, or past the tool-call limit with an error text of its
    own and no flag). Each tool message records its tool's effect from `effects` (the agent's
    `tool_effects`); a name it does not know is `external`, the safe assumption. A call that
    did not run still records its tool's effect: what the tool may do, not what it did.
    A tool result keeps the run's `images` (`RunOutput.images`) it names (agents.mcp.results)
    in `metadata["images"]`; the user message agno adds to carry them to the model is not
    stored (agents.mcp.vision)."""
    new: list[NewMessage] = []
    names: dict[str, str] = {}
    seen_user = False
    for m in messages:
        if m.role in ("system", "developer") or m.from_history:
            continue
        if m.role == "user" and not seen_user:
            seen_user = True  # the turn's own message, stored when the turn started
            continue
        if m.role == "assistant":
            calls = m.tool_calls or None
            for call in calls or []:
                fn = call.get("function") or {}
                if call.get("id") and fn.get("name"):
                    names[call["id"]] = fn["name"]
            new.append(
                NewMessage(
                    role="assistant",
                    content=_text(m.content),
                    tool_calls=calls,
                    metadata={"model": model, **_metrics(m)},
                )
            )
        elif m.role == "tool":
            result = _text(m.content)
            failed = bool(m.tool_call_error) or (ran is not None and m.tool_call_id not in ran)
            name = m.tool_name or names.get(m.tool_call_id or "", "")
            new.append(
                NewMessage(
                    role="tool",
                    content=result,
                    tool_name=name,
                    tool_args=m.tool_args,
                    tool_result=result,
                    tool_call_id=m.tool_call_id or "",
                    metadata=_tool_metadata(result, failed, images),
                    effect=(effects or {}).get(name, DEFAULT_EFFECT),
                )
            )
        elif m.role == "user" and m.images and m.content == MEDIA_NOTE:
            continue  # agno's carrier of the tools' images (agents.mcp.vision)
        elif m.role == "user":
            new.append(NewMessage(role="user", content=_text(m.content)))
    return new


def _tool_metadata(result: str, failed: bool, images: list[Any] | None) -> dict[str, Any]:
    if failed:
        return {"error": True}
    shown = images_of_result(result, images)
    return {"images": shown} if shown else {}
