"""The offline demo model: deterministic, streamed word by word, able to call the tools when
asked plainly. It answers when no OPENAI_API_KEY or OPENAI_BASE_URL is configured."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from agno.metrics import MessageMetrics
from agno.models.base import Model
from agno.models.message import Message
from agno.models.response import ModelResponse

from core.model_choice import DEMO_MODEL_ID

DEMO_NOTICE = (
    "I am Rollback's offline demo model: set OPENAI_API_KEY or OPENAI_BASE_URL to talk to a "
    "real model. Try “calculate (2+3)*4”, “write notes.md saying hello”, “checkpoint as "
    "start”, “list the files”, “add a todo: buy milk” or “roll back to start”."
)

_NAME = r"[\"'“”‘’]?(?P<name>[^\"'“”‘’]+?)[\"'“”‘’]?"
# A file the user names: a path with an extension (notes.md, docs/plan.txt), quoted or not.
_PATH = r"[\"'`“”‘’]?(?P<path>[^\s\"'`“”‘’]+\.[A-Za-z0-9]+)[\"'`“”‘’]?"
_PLEASE = r"^\s*(?:please\s+)?(?:can you\s+|could you\s+)?"
_TODO = r"(?:todo|to-do|task)"
_INTENTS: list[tuple[str, re.Pattern[str]]] = [
    (
        # "remember KEY: FACT": the fact under that key (category Project, unless the key starts
        # with another category's name, as in "comm.tone: be brief"). First, and anchored at
        # the start, so a fact that says "restore ..." is remembered, not taken for a rollback.
        "remember",
        re.compile(
            r"^\s*(?:please\s+)?remember\s+(?:that\s+)?(?P<key>[^\W_][\w.-]*)\s*:\s*"
            r"(?P<fact>\S.*?)\s*$",
            re.I | re.S,
        ),
    ),
    ("recall", re.compile(r"^\s*(?:please\s+)?recall\s+(?P<query>\S.*?)\s*[?.!]*$", re.I | re.S)),
    (
        # "write a file notes.md saying hello", "create notes.md with: ...": anchored at the
        # start, like remember, so the content may say anything (even "roll back to start").
        "write_file",
        re.compile(
            rf"{_PLEASE}(?:write|create|make|save)\s+(?:(?:a|an|the|new)\s+)*(?:file\s+)?"
            rf"(?:called\s+|named\s+)?{_PATH}\s*(?:,\s*)?"
            r"(?:saying|with(?: the content)?|containing|that says|:)\s*:?\s*(?P<content>.*?)\s*$",
            re.I | re.S,
        ),
    ),
    (
        "read_file",
        re.compile(
            rf"{_PLEASE}(?:read|open|show me|show|cat)\s+(?:me\s+)?(?:the\s+)?(?:file\s+)?"
            rf"{_PATH}\s*[.!?]*$",
            re.I,
        ),
    ),
    (
        "delete_file",
        re.compile(rf"{_PLEASE}(?:delete|remove)\s+(?:the\s+)?(?:file\s+)?{_PATH}\s*[.!?]*$", re.I),
    ),
    (
        "list_dir",
        re.compile(
            r"\b(?:list|show)(?: me)?(?: all| my| the)? files\b"
            r"(?:\s+(?:in|under)\s+(?:the\s+)?(?:folder\s+)?(?P<folder>[^\s?.!]+))?",
            re.I,
        ),
    ),
    (
        "create_todo",
        re.compile(
            rf"{_PLEASE}(?:add|create|new)\s+(?:a\s+)?{_TODO}(?:\s+item)?\s*:?\s+"
            r"(?P<title>\S.*?)\s*[.!]*$",
            re.I | re.S,
        ),
    ),
    (
        "mark_todo_done",
        re.compile(
            rf"\b(?:mark|tick(?: off)?|check off|complete|finish)\s+(?:the\s+)?{_TODO}\s+"
            r"#?(?P<id>\d+)\b",
            re.I,
        ),
    ),
    (
        "get_todo",
        re.compile(
            rf"\b(?:show|list|see|what(?:'s| is) on)(?: me)?(?: all| my| the)?\s+"
            rf"(?:{_TODO}s?(?: list)?|plan)\b",
            re.I,
        ),
    ),
    (
        "rollback_to_checkpoint_tool",
        re.compile(
            r"\b(?:roll ?back|rewind|restore|go back)\s+(?:to\s+)?(?:checkpoint\s+)?"
            rf"{_NAME}\s*[.!?]*$",
            re.I,
        ),
    ),
    ("list_checkpoints_tool", re.compile(r"\b(?:list|show)(?: all| my| the)? checkpoints\b", re.I)),
    ("delete_checkpoint_tool", re.compile(r"\bdelete checkpoint\s+#?(?P<id>\d+)\b", re.I)),
    (
        "get_checkpoint_info_tool",
        re.compile(
            r"\b(?:info|details|describe)(?: (?:on|about|for|of))? checkpoint\s+#?(?P<id>\d+)\b",
            re.I,
        ),
    ),
    (
        "cleanup_auto_checkpoints_tool",
        re.compile(r"\bclean ?up\b.*\bcheckpoints\b(?:.*\bkeep(?:ing)?\s+(?P<keep>\d+))?", re.I),
    ),
    (
        # Anchored at the start, and tried after delete/info/clean-up, so "delete checkpoint 4"
        # or "please describe checkpoint 4" never create a checkpoint named "4".
        "create_checkpoint",
        re.compile(
            r"^\s*(?:please\s+)?(?:(?:save|create|make|take)(?: a)?\s+)?checkpoint"
            rf"(?:\s+(?:as|named|called))?\s+{_NAME}\s*[.!?]*$",
            re.I,
        ),
    ),
    (
        "calculate",
        re.compile(
            r"\b(?:calculate|compute|evaluate|what is|what's)\s+"
            r"(?P<expr>[-+*/%().\d\s^×÷]+?)\s*[?.!]*$",
            re.I,
        ),
    ),
]


# The summarising requests of agents.context start their instructions with this; the demo
# model then answers with an extract of the conversation instead of its usual reply.
SUMMARY_MARKER = "You write the running summary of a conversation"


# The titling requests of agents.titles start their instructions with this; the demo model then
# answers with a title made of the first words of the user's first message.
TITLE_MARKER = "You give conversations short titles"


# A turn that continues a cut-off reply (agents.history.CONTINUE_INSTRUCTION) asks with this;
# the demo model then goes on with a short ending instead of quoting the request.
CONTINUE_MARKER = "Your previous reply was cut off"
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


_CATEGORIES = ("System", "Environment", "Skill", "Project", "Comm", "Security")


def _category_of(key: str) -> str:
    first = re.split(r"[._-]", key, maxsplit=1)[0].lower()
    return next((c for c in _CATEGORIES if c.lower() == first), "Project")


def _unquoted(text: str) -> str:
    """`text` without one pair of quotes around it."""
    text = text.strip()
    pairs = {'"': '"', "'": "'", "“": "”", "‘": "’", "`": "`"}
    if len(text) >= 2 and pairs.get(text[0]) == text[-1]:
        return text[1:-1]
    return text


def _remember_args(groups: dict[str, Any]) -> dict[str, Any]:
    key = groups["key"]
    return {"key": key, "category": _category_of(key), "l0": groups["fact"]}


def _cleanup_args(groups: dict[str, Any]) -> dict[str, Any]:
    return {"keep_latest": int(groups["keep"]) if groups.get("keep") else 5}


# The arguments of each tool's call, from the groups its pattern matched (none: no arguments).
_ARGUMENTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "calculate": lambda g: {"expression": g["expr"].strip()},
    "create_checkpoint": lambda g: {"name": g["name"].strip()},
    "rollback_to_checkpoint_tool": lambda g: {"checkpoint_id_or_name": g["name"].strip()},
    "delete_checkpoint_tool": lambda g: {"checkpoint_id": int(g["id"])},
    "get_checkpoint_info_tool": lambda g: {"checkpoint_id": int(g["id"])},
    "remember": _remember_args,
    "recall": lambda g: {"query": g["query"]},
    "cleanup_auto_checkpoints_tool": _cleanup_args,
    "write_file": lambda g: {"path": g["path"], "content": _unquoted(g["content"])},
    "read_file": lambda g: {"path": g["path"]},
    "delete_file": lambda g: {"path": g["path"]},
    "list_dir": lambda g: {"path": g["folder"] or ""},
    "create_todo": lambda g: {"title": _unquoted(g["title"])},
    "mark_todo_done": lambda g: {"todo_id": int(g["id"])},
}


def _intent(text: str, available: set[str]) -> tuple[str, dict[str, Any]] | None:
    """The first tool (of those offered) whose pattern the message matches, with its
    arguments."""
    for tool, pattern in _INTENTS:
        if tool not in available:
            continue
        match = pattern.search(text.strip())
        if match:
            build = _ARGUMENTS.get(tool)
            return tool, build(match.groupdict()) if build else {}
    return None


# A tool's result is written for a model and points to other tools by name; the demo hands it
# to the user as its reply, so each pointer becomes what the user would ask for instead.
_USER_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"Use list_checkpoints_tool to see the checkpoints\."),
        "Ask me to “list the checkpoints” to see them.",
    ),
    (re.compile(r"\(see list_checkpoints_tool\)"), "(ask me to “list the checkpoints”)"),
    (re.compile(r"use read_file to read it\."), "ask me to “read” it."),
    (re.compile(r"Use list_dir to see the files\."), "Ask me to “list the files” to see them."),
    (re.compile(r", as get_todo shows it\."), ", as “show the todos” lists it."),
    (re.compile(r"Use get_todo to see the todos\."), "Ask me to “show the todos” to see them."),
    (
        re.compile(r"Call recall with key=\.\.\. to read one in full\."),
        "Ask me to “recall” one by its key to read it in full.",
    ),
)
# Any other tool name left in a result: the request that calls it, in the user's words
# ("calculate" is left alone: it is an ordinary word too).
_ASKED_AS = {
    "create_checkpoint": "checkpoint as …",
    "list_checkpoints_tool": "list the checkpoints",
    "rollback_to_checkpoint_tool": "roll back to …",
    "delete_checkpoint_tool": "delete checkpoint …",
    "get_checkpoint_info_tool": "describe checkpoint …",
    "cleanup_auto_checkpoints_tool": "clean up the checkpoints",
    "list_dir": "list the files",
    "read_file": "read …",
    "write_file": "write … saying …",
    "delete_file": "delete …",
    "create_todo": "add a todo: …",
    "get_todo": "show the todos",
    "mark_todo_done": "mark todo … done",
}
_TOOL_NAME = re.compile(r"\b(" + "|".join(sorted(_ASKED_AS, key=len, reverse=True)) + r")\b(?!\()")


def in_user_words(text: str) -> str:
    """`text` (a tool's result) with no tool name in it: what the user would ask for instead."""
    for pattern, words in _USER_WORDS:
        text = pattern.sub(words, text)
    return _TOOL_NAME.sub(lambda m: f"“{_ASKED_AS[m.group(1)]}”", text)


def _after_tool(message: Message) -> str:
    result = message.content if isinstance(message.content, str) else str(message.content)
    if message.tool_name == "calculate" and not result.startswith("Error"):
        return f"The result is **{result}**."
    if not result.strip():  # an empty file read: a reply is never empty
        return "The file is empty." if message.tool_name == "read_file" else "Done."
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
