"""The limits on a turn's texts: a user's message (`clean_user_message`), the agent's texts cut
off at AGENT_MAX_REPLY_CHARS (`bounded`, marked with CUT_NOTE), the same limits on a message
brought in whole (`message_limits_check`), and a reply cut off before the model finished it
(`is_cut_off`), which can be continued."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from core.errors import InvalidInput
from core.validation import storable_text
from sessions_app.errors import MessageTooLong

from ..models import Message

# Ends a text the agent produced that was cut off at its length limit (AGENT_MAX_REPLY_CHARS, or
# the model's own max_tokens): a reply, a tool's result, a tool call's arguments.
CUT_NOTE = "\n\n[cut off here: it reached the length limit]"


def cut_off(text: str, limit: int) -> str:
    """At most `limit` characters of `text`, marked as cut off."""
    return text[:limit] + CUT_NOTE


def bounded(text: str, limit: int) -> str:
    """`text`, cut off at `limit` characters when it is longer (a text already cut off, ending
    with the note, stays as it is)."""
    if len(text) <= limit or (text.endswith(CUT_NOTE) and len(text) <= limit + len(CUT_NOTE)):
        return text
    return cut_off(text, limit)


def bounded_json(value: Any, limit: int) -> Any:
    """A JSON value (a tool call's arguments) whose text is longer than `limit` characters is
    replaced by {"cut_off": the start of that text}."""
    if value is None:
        return None
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= limit else {"cut_off": cut_off(text, limit)}


def bounded_calls(calls: Any, limit: int) -> Any:
    """An assistant message's tool calls, each one's arguments (JSON text) bounded."""
    if not isinstance(calls, list):
        return bounded_json(calls, limit)
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            arguments = function.get("arguments")
            if isinstance(arguments, str) and len(arguments) > limit:
                call = {**call, "function": {**function, "arguments": cut_off(arguments, limit)}}
        out.append(call)
    return out


def message_limits_check(
    *, what: str, role: str, content: str, tool_result: str, tool_args: Any, tool_calls: Any
) -> None:
    """A message brought in whole (an imported one) within the limits of the messages typed and
    generated here: a user's text at most AGENT_MAX_INPUT_CHARS characters (`clean_user_message`);
    the agent's texts, tool results and tool-call arguments as `turn_store_answer` bounds them,
    at most AGENT_MAX_REPLY_CHARS (and the note saying a text was cut off there). MessageTooLong
    (413) names the message (`what`) and the part."""
    limit = settings.AGENT_MAX_REPLY_CHARS
    if role == Message.Role.USER:
        typed = settings.AGENT_MAX_INPUT_CHARS
        if len(content) > typed:
            raise MessageTooLong(
                f"The content of {what} is {len(content)} characters long; the limit for a "
                f"user's message is {typed}."
            )
    elif bounded(content, limit) != content:
        raise MessageTooLong(
            f"The content of {what} is {len(content)} characters long; the limit is {limit}."
        )
    if bounded(tool_result, limit) != tool_result:
        raise MessageTooLong(
            f"The tool_result of {what} is {len(tool_result)} characters long; "
            f"the limit is {limit}."
        )
    cut = tool_args.get("cut_off") if isinstance(tool_args, dict) and len(tool_args) == 1 else None
    if bounded_json(tool_args, limit) != tool_args and not (
        isinstance(cut, str) and bounded(cut, limit) == cut
    ):
        raise MessageTooLong(f"The tool_args of {what} are longer than {limit} characters as JSON.")
    if bounded_calls(tool_calls, limit) != tool_calls:
        raise MessageTooLong(
            f"A tool call's arguments in {what} are longer than {limit} characters."
        )


def clean_user_message(message: object) -> str:
    if not isinstance(message, str):
        raise InvalidInput("The message must be text.")
    text: str = storable_text(message)
    if not text.strip():
        raise InvalidInput("The message is empty.")
    limit = settings.AGENT_MAX_INPUT_CHARS
    if len(text) > limit:
        raise MessageTooLong(f"The message is {len(text)} characters long; the limit is {limit}.")
    return text


# A reply ended before the model finished it (a length limit, or a stream that ended early):
# it can be continued.
CUT_OFF_REASONS = ("length", "interrupted")


def is_cut_off(message: Message) -> bool:
    """An assistant reply that ended before the model finished it: shown as cut off, and, as
    its branch's last message, continued in place (`turn_continue`)."""
    metadata = message.metadata if isinstance(message.metadata, dict) else {}
    return (
        message.role == Message.Role.ASSISTANT
        and not message.tool_calls
        and metadata.get("finish_reason") in CUT_OFF_REASONS
    )


def without_cut_note(text: str) -> str:
    """A cut-off reply's text without the note that marks it cut off (CUT_NOTE)."""
    return text.removesuffix(CUT_NOTE)
