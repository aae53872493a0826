"""The offline demo model: deterministic, streamed word by word, able to call the tools when
asked plainly. It answers when no OPENAI_API_KEY or OPENAI_BASE_URL is configured.

The requests it answers with a tool call, its words for a tool in a result it shows the user and
its reply to a tool's result are declared with each built-in tool (agents.builtin_tools): it reads
them from the registry, and knows no tool by name."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from agno.metrics import MessageMetrics
from agno.models.base import Model
from agno.models.message import Message
from agno.models.response import ModelResponse

from core.model_choice import DEMO_MODEL_ID

from .builtin_tools import REGISTRY

# The markers that open the requests answered their own way; declared apart from agno
# (agents.markers), importable from here as before.
from .markers import CONTINUE_MARKER as CONTINUE_MARKER
from .markers import SUMMARY_MARKER as SUMMARY_MARKER
from .markers import TITLE_MARKER as TITLE_MARKER
from .registry import BuiltinTool

DEMO_NOTICE = (
    "I am Rollback's offline demo model: set OPENAI_API_KEY or OPENAI_BASE_URL to talk to a "
    "real model. Try “calculate (2+3)*4”, “write notes.md saying hello”, “checkpoint as "
    "start”, “list the files”, “add a todo: buy milk” or “roll back to start”."
)

# What the demo model says to a turn that continues a cut-off reply (CONTINUE_MARKER).
DEMO_CONTINUATION = " …and that is the end of it (the offline demo model has nothing more to add)."


def _demo_title(messages: list[Message]) -> str:
    text = messages[-1].content if messages and isinstance(messages[-1].content, str) else ""
    asked = next(
        (line[len("user: ") :] for line in text.splitlines() if line.startswith("user: ")), ""
    )
    words = re.findall(r"[^\W_]+(?:['’-][^\W_]+)*", asked)[:6]
    if not words:
        return "Conversation"
    title = " ".join(words)
    return title[:1].upper() + title[1:]


def _demo_summary(messages: list[Message]) -> str:
    """An extract standing in for a summary: the start of each user message of the piece."""
    text = messages[-1].content if messages and isinstance(messages[-1].content, str) else ""
    asked = [
        line[len("user: ") :].strip() for line in text.splitlines() if line.startswith("user: ")
    ]
    earlier = ""
    if "<summary>" in text and "</summary>" in text:
        earlier = text.split("<summary>", 1)[1].split("</summary>", 1)[0].strip()
    points = "; ".join(a[:60] for a in asked if a)[:600]
    summary = (
        f"{earlier} The user then asked: {points}." if earlier else f"The user asked: {points}."
    )
    if len(summary) > 1500:  # keep the start and the latest points
        summary = summary[:700] + " … " + summary[-700:]
    return summary.strip()


def _available(tools: list[dict[str, Any]] | None) -> set[str]:
    names = set()
    for tool in tools or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            names.add(fn["name"])
    return names


def _tool_call(name: str, arguments: dict[str, Any], n: int) -> dict[str, Any]:
    return {
        "id": f"demo_call_{n}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _intent(text: str, available: set[str]) -> tuple[str, dict[str, Any]] | None:
    """The first tool (of those offered) whose intent the message matches, with its
    arguments (agents.builtin_tools declares each tool's intents and their order)."""
    for tool, intent in REGISTRY.intents():
        if tool.name not in available:
            continue
        match = intent.pattern.search(text.strip())
        if match:
            return tool.name, intent.arguments(match.groupdict())
    return None


@dataclass(frozen=True)
class _UserWords:
    """A tool's result is written for a model and points to other tools by name; the demo
    hands it to the user as its reply, so each pointer becomes what the user would ask for
    instead: first the whole phrases the tools declare (`rewrites`), then any other tool name
    left (`asked_as`; a tool without one, such as "calculate", an ordinary word too, is left
    alone)."""

    phrases: tuple[tuple[re.Pattern[str], str], ...]
    asked: dict[str, str]
    names: re.Pattern[str] | None


@lru_cache(maxsize=8)
def _user_words(tools: tuple[BuiltinTool, ...]) -> _UserWords:
    phrases = tuple((re.compile(p), words) for t in tools for p, words in t.rewrites)
    asked = {t.name: t.asked_as for t in tools if t.asked_as}
    longest_first = "|".join(sorted(asked, key=len, reverse=True))
    names = re.compile(r"\b(" + longest_first + r")\b(?!\()") if asked else None
    return _UserWords(phrases, asked, names)


def in_user_words(text: str) -> str:
    """`text` (a tool's result) with no tool name in it: what the user would ask for instead."""
    words = _user_words(tuple(REGISTRY))
    for pattern, replacement in words.phrases:
        text = pattern.sub(replacement, text)
    if words.names is None:
        return text
    return words.names.sub(lambda m: f"“{words.asked[m.group(1)]}”", text)


def _after_tool(message: Message) -> str:
    result = message.content if isinstance(message.content, str) else str(message.content)
    tool = REGISTRY.get(message.tool_name)
    reply = tool.reply(result) if tool is not None and tool.reply is not None else None
    if reply is not None:
        return reply
    if not result.strip():  # an empty result (an empty file read): a reply is never empty
        return tool.empty_reply if tool is not None else "Done."
    return in_user_words(result)


@dataclass
class DemoModel(Model):
    id: str = DEMO_MODEL_ID
    name: str = "Demo"
    provider: str = "Rollback (offline demo)"
    # Seconds between streamed words, so a reply visibly streams in.
    word_delay: float = 0.0

    def _decide(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> ModelResponse:
        first = messages[0] if messages else None
        if first is not None and SUMMARY_MARKER in str(first.content or ""):
            return ModelResponse(role="assistant", content=_demo_summary(messages))
        if first is not None and TITLE_MARKER in str(first.content or ""):
            return ModelResponse(role="assistant", content=_demo_title(messages))
        last = messages[-1] if messages else None
        if last is not None and last.role == "tool":
            return ModelResponse(role="assistant", content=_after_tool(last))
        text = last.content if last is not None and isinstance(last.content, str) else ""
        if CONTINUE_MARKER in text:
            return ModelResponse(role="assistant", content=DEMO_CONTINUATION)
        found = _intent(text, _available(tools))
        if found is not None:
            name, args = found
            return ModelResponse(
                role="assistant", content="", tool_calls=[_tool_call(name, args, len(messages))]
            )
        earlier = sum(1 for m in messages if m.role in ("user", "assistant")) - 1
        quoted = text.strip().replace("\n", " ")
        if len(quoted) > 200:
            quoted = quoted[:200] + "…"
        return ModelResponse(
            role="assistant",
            content=(
                f"You said: “{quoted}”. This conversation had {earlier} earlier "
                f"message{'s' if earlier != 1 else ''}. {DEMO_NOTICE}"
            ),
        )

    def _usage(self, messages: list[Message], reply: ModelResponse) -> MessageMetrics:
        words_in = sum(len(str(m.content or "").split()) for m in messages)
        words_out = len(str(reply.content or "").split()) + 10 * len(reply.tool_calls or [])
        return MessageMetrics(
            input_tokens=words_in, output_tokens=words_out, total_tokens=words_in + words_out
        )

    def invoke(
        self, messages: list[Message], assistant_message: Message, **kwargs: Any
    ) -> ModelResponse:
        reply = self._decide(messages, kwargs.get("tools"))
        reply.response_usage = self._usage(messages, reply)
        return reply

    async def ainvoke(
        self, messages: list[Message], assistant_message: Message, **kwargs: Any
    ) -> ModelResponse:
        return self.invoke(messages, assistant_message, **kwargs)

    def invoke_stream(
        self, messages: list[Message], assistant_message: Message, **kwargs: Any
    ) -> Iterator[ModelResponse]:
        reply = self._decide(messages, kwargs.get("tools"))
        usage = self._usage(messages, reply)
        if reply.tool_calls:
            yield ModelResponse(role="assistant", tool_calls=reply.tool_calls, response_usage=usage)
            return
        words = re.findall(r"\S+\s*|\s+", reply.content or "")
        for i, word in enumerate(words):
            if self.word_delay and i:
                time.sleep(self.word_delay)
            yield ModelResponse(role="assistant", content=word)
        yield ModelResponse(role="assistant", response_usage=usage)

    async def ainvoke_stream(
        self, messages: list[Message], assistant_message: Message, **kwargs: Any
    ) -> AsyncIterator[ModelResponse]:
        for delta in self.invoke_stream(messages, assistant_message, **kwargs):
            yield delta

    # The demo's "provider" answers with agno's own responses already.
    def _parse_provider_response(self, response: ModelResponse, **kwargs: Any) -> ModelResponse:
        return response

    def _parse_provider_response_delta(self, response: ModelResponse) -> ModelResponse:
        return response
