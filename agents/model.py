"""The one place the model is chosen and configured.

With OPENAI_API_KEY or OPENAI_BASE_URL set, agno's OpenAI-compatible chat model talks to that
server over the Chat Completions API (role `system` for the instructions, which OpenAI and every
compatible server accept). Otherwise the offline demo model answers.

Each request carries max_tokens (AGENT_MAX_OUTPUT_TOKENS), and a streamed response is cut at
AGENT_MAX_REPLY_CHARS characters whatever the server sends (turns always stream).

Retries: the openai client retries 408, 409, 429, 5xx, connection errors and timeouts up to
AGENT_MAX_RETRIES times, waiting as long as the server asks under any of the names servers and
gateways use (agents.retry), else with exponential backoff; agno's own model retries stay off so
that there is exactly one retry policy.

An error the server sends inside a stream (`data: {"error": {...}}`, as LiteLLM and OpenRouter do
when their upstream fails mid-answer) fails the response with the server's message, whatever text
came before it; only a stream that merely ends or breaks keeps its text as an interrupted reply.
A failed request's error is put in words a user can act on by agents.model_errors.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import openai
from agno.agent import Agent
from agno.exceptions import ModelProviderError
from agno.models.base import Model
from agno.models.openai.like import OpenAILike
from agno.models.response import ModelResponse
from agno.run.base import RunStatus
from django.conf import settings

from access.errors import ModelNotAllowed
from access.selectors import model_check
from accounts.models import User
from core.model_choice import DEMO_MODEL_ID, model_settings
from core.model_choice import ModelSettings as ModelSettings  # moved there: no agno needed
from core.model_choice import is_demo as is_demo  # agents.model.is_demo: used by the pages, the CLI
from core.model_choice import model_id_for as model_id_for  # moved there: no agno needed
from usage.services import usage_record

from .demo_model import DemoModel
from .model_errors import explain, stream_error
from .model_errors import redact as redact  # agents.model.redact: used by the turns
from .retry import AsyncClient, Client

log = logging.getLogger(__name__)


def _side_chars(delta: ModelResponse) -> int:
    """The characters of a streamed delta besides its text: tool-call arguments and reasoning."""
    count = len(delta.reasoning_content or "")
    for call in delta.tool_calls or []:
        function = _field(call, "function")
        arguments = _field(function, "arguments")
        count += len(arguments) if isinstance(arguments, str) else 0
    return count


def _tokens(value: Any) -> int:
    """A token count a server reported: a whole number, never below 0 (else 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


class ReplyTooLong(ModelProviderError):
    """Tool-call arguments or reasoning passed AGENT_MAX_REPLY_CHARS."""


class _ReplyBound:
    """Watches one streamed response: counts it against the model's `max_reply_chars`, and
    notes the text that arrived and the tool calls it asks for."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.used = 0
        self.text = 0
        self.calls: set[Any] = set()

    def take(self, delta: ModelResponse) -> bool:
        """Count `delta`, cutting its text to what is left; True when the stream must stop
        after it. Tool-call arguments or reasoning past the limit fail the response."""
        limit = self.model.max_reply_chars
        self.used += _side_chars(delta)
        for call in delta.tool_calls or []:
            index = _field(call, "index")
            self.calls.add(index if index is not None else _field(call, "id"))
        if self.used > limit:
            raise ReplyTooLong(
                message=f"the model's answer passed the limit of {limit} characters "
                "(AGENT_MAX_REPLY_CHARS) before its text; it was stopped",
                model_name=self.model.name,
                model_id=self.model.id,
            )
        if not isinstance(delta.content, str):
            return False
        if self.used + len(delta.content) > limit:
            delta.content = delta.content[: limit - self.used]
            self.text += len(delta.content)
            self.model.cut_off = "chars"
            return True
        self.used += len(delta.content)
        self.text += len(delta.content)
        return False

    def ended_early(self, exc: ModelProviderError | None) -> bool:
        """The response ended without a finish (the stream closed, or broke with `exc`): True
        when its text so far can be kept as an interrupted reply. A response with no text, or
        with tool calls (whose arguments may be cut), cannot: that raises. Nor can one the
        server said failed, with an error event in the stream: that raises with its message."""
        if exc is not None and stream_error(exc.__cause__) is not None:
            raise explain(exc, self.model, streamed=bool(self.text)) from exc
        if self.text and not self.calls:
            self.model.interrupted = True
            if exc is not None:
                log.warning("the model's stream broke after %s characters: %s", self.text, exc)
            return True
        if exc is not None:
            raise explain(exc, self.model) from exc
        raise ModelProviderError(
            message="the model's answer ended before it was finished"
            + (" (its tool calls may be incomplete, so none was run)" if self.calls else ""),
            model_name=self.model.name,
            model_id=self.model.id,
        )


def tool_limit_note(limit: int) -> str:
    calls = "tool call" if limit == 1 else "tool calls"
    return f"Stopped after {limit} {calls} (the limit per turn)."


@dataclass
class ChatModel(OpenAILike):
    """agno's OpenAI-compatible chat model, with errors that say what went wrong and streamed
    responses of at most `max_reply_chars` characters: a longer one is cut there and its
    request closed. After each streamed response:

    - `cut_off` says whether it was cut short, by this bound ("chars") or by the server's own
      limit, max_tokens ("tokens");
    - `interrupted` says whether it ended without a finish (the stream closed or broke after
      some text arrived: that text is the answer, and the run goes on as if it had finished);
    - `tool_calls_made` counts the tool calls asked for in this turn. Once they reach
      `max_tool_calls`, the model sends no more requests: its next answer is a note saying so
      (`tool_limit_hit`). `begin_turn()` starts counting again.
    - `spent` counts the tokens of every response as the server reported them (its usage, the
      largest it sent in a response: some servers send it with every chunk), whether or not the
      run that asked finishes, pauses or is stopped (agents.turn.store.record_usage)."""

    max_reply_chars: int = 200_000
    max_tool_calls: int | None = None
    cut_off: str | None = None
    interrupted: bool = False
    tool_calls_made: int = 0
    tool_limit_hit: bool = False
    spent: tuple[int, int] = (0, 0)  # input and output tokens, every response so far
    _finished: bool = False
    _usage: tuple[int, int] = (0, 0)  # the response's, as reported so far

    def get_async_client(self) -> openai.AsyncOpenAI:
        """agno's async client, with our retry policy (agents.retry) as the shared sync one."""
        if self.async_client is None or self.async_client.is_closed():
            self.async_client = AsyncClient(**self._get_client_params())
        return self.async_client

    def begin_turn(self) -> None:
        self.tool_calls_made = 0
        self.tool_limit_hit = False
        self.cut_off = None
        self.interrupted = False

    def invoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        try:
            return super().invoke(*args, **kwargs)
        except ModelProviderError as exc:
            raise explain(exc, self) from exc

    async def ainvoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        try:
            return await super().ainvoke(*args, **kwargs)
        except ModelProviderError as exc:
            raise explain(exc, self) from exc

    def _start_response(self) -> ModelResponse | None:
        """Before a streamed request: the note that ends the turn instead, once the tool calls
        reached the limit."""
        self.cut_off = None
        self.interrupted = False
        self._finished = False
        self._usage = (0, 0)
        limit = self.max_tool_calls
        if limit is not None and self.tool_calls_made and self.tool_calls_made >= limit:
            self.tool_limit_hit = True
            return ModelResponse(role="assistant", content=tool_limit_note(limit))
        return None

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        note = self._start_response()
        if note is not None:
            yield note
            return
        bound = _ReplyBound(self)
        stream = super().invoke_stream(*args, **kwargs)
        try:
            for delta in stream:
                stop = bound.take(delta)
                yield delta
                if stop:
                    return
        except ReplyTooLong:
            raise
        except ModelProviderError as exc:
            if bound.ended_early(exc):
                return
        else:
            if not self._finished:
                bound.ended_early(None)
        finally:
            self.tool_calls_made += len(bound.calls)
            self._count_usage()
            close = getattr(stream, "close", None)  # a generator: ends the request to the server
            if close is not None:
                close()

    async def ainvoke_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ModelResponse]:
        note = self._start_response()
        if note is not None:
            yield note
            return
        bound = _ReplyBound(self)
        stream = super().ainvoke_stream(*args, **kwargs)
        try:
            async for delta in stream:
                stop = bound.take(delta)
                yield delta
                if stop:
                    return
        except ReplyTooLong:
            raise
        except ModelProviderError as exc:
            if bound.ended_early(exc):
                return
        else:
            if not self._finished:
                bound.ended_early(None)
        finally:
            self.tool_calls_made += len(bound.calls)
            self._count_usage()
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    def take_spent(self) -> tuple[int, int]:
        """The tokens spent since the last take (an agent of the Python API keeps its model
        from turn to turn: each turn's record holds its own)."""
        spent, self.spent = self.spent, (0, 0)
        return spent

    def _count_usage(self) -> None:
        self.spent = (self.spent[0] + self._usage[0], self.spent[1] + self._usage[1])
        self._usage = (0, 0)

    def _parse_provider_response_delta(self, response_delta: Any) -> ModelResponse:
        usage = getattr(response_delta, "usage", None)
        if usage is not None:
            self._usage = (
                max(self._usage[0], _tokens(_field(usage, "prompt_tokens"))),
                max(self._usage[1], _tokens(_field(usage, "completion_tokens"))),
            )
        for choice in response_delta.choices or []:
            if choice.finish_reason:
                self._finished = True
            if choice.finish_reason == "length":
                self.cut_off = self.cut_off or "tokens"
        return super()._parse_provider_response_delta(response_delta)


def default_model_for(owner: User) -> str | None:
    """The model that answers `owner`'s sessions that chose none, their turns and the titles and
    summaries made for them alike: the first their access gives (access.selectors); None when it
    gives none (their turns are refused at their start) or the demo model answers."""
    try:
        return model_check(owner, None)
    except ModelNotAllowed:
        return None


def reply_cut_off(model: Model | None) -> bool:
    """Whether the model's last streamed response was cut short by a length limit."""
    return isinstance(model, ChatModel) and model.cut_off is not None


def reply_interrupted(model: Model | None) -> bool:
    """Whether the model's last streamed response ended without a finish."""
    return isinstance(model, ChatModel) and model.interrupted


def tool_limit_hit(model: Model | None) -> bool:
    """Whether the turn stopped because the model asked for more tool calls than allowed."""
    return isinstance(model, ChatModel) and model.tool_limit_hit


def build_model(
    session_settings: Mapping[str, object] | None = None,
    *,
    default_id: str | None = None,
    default_temperature: float | None = None,
    max_tokens: int | None = None,
) -> Model:
    """A fresh agno model for one turn; InvalidInput when the session's settings ask for a
    model or temperature it may not use. `max_tokens` replaces AGENT_MAX_OUTPUT_TOKENS (the
    summaries of agents.context ask for less)."""
    chosen = model_settings(
        session_settings, default_id=default_id, default_temperature=default_temperature
    )
    if is_demo():
        return DemoModel(word_delay=settings.DEMO_MODEL_WORD_DELAY)
    model = ChatModel(
        id=chosen["id"],
        name="OpenAI-compatible",
        temperature=chosen["temperature"],
        api_key=settings.OPENAI_API_KEY or "not-needed",
        base_url=settings.OPENAI_BASE_URL or None,
        max_retries=settings.AGENT_MAX_RETRIES,
        timeout=settings.AGENT_TIMEOUT,
        retries=0,
        max_tokens=max_tokens
        or (settings.AGENT_MAX_OUTPUT_TOKENS if settings.AGENT_MAX_OUTPUT_TOKENS > 0 else None),
        max_reply_chars=settings.AGENT_MAX_REPLY_CHARS,
        max_tool_calls=max_tool_calls(),
    )
    model.client = shared_client(model)
    return model


# One openai client per process and configuration, shared by every turn's fresh model: building
# one (its httpx client, TLS context and connection pool) took tens of milliseconds, the largest
# part of a turn's own cost, and a kept pool reuses its connections to the model server. The
# client is thread-safe; keyed by process id too, so a forked worker never shares sockets.
_clients: dict[tuple[Any, ...], openai.OpenAI] = {}
_clients_lock = threading.Lock()


def shared_client(model: ChatModel) -> openai.OpenAI:
    params = model._get_client_params()
    key = (os.getpid(), *sorted((k, repr(v)) for k, v in params.items()))
    with _clients_lock:
        client = _clients.get(key)
        if client is None or client.is_closed():
            client = _clients[key] = Client(**params)
        return client


@dataclass(frozen=True)
class ChargeTo:
    """Whose usage a request outside a turn is (a summary's, a title's): a UsageRecord's."""

    user_id: int
    session_id: int | None
    kind: str
    branch_id: int | None = None
    turn_id: int | None = None


def ask_once(
    model: Model, instructions: str, prompt: str, *, charge: ChargeTo | None = None
) -> tuple[bool, str]:
    """One request to the model outside any turn (a summary, a title): no tools, no history,
    no storage but its usage, recorded for `charge` (a call like any other). (True, its answer)
    when it answered; (False, the readable error) when not."""
    agent = Agent(model=model, instructions=instructions, db=None, telemetry=False, markdown=False)
    output = agent.run(input=prompt)
    if charge is not None and output.metrics is not None:
        try:
            usage_record(
                user_id=charge.user_id,
                model=model_label(model),
                input_tokens=output.metrics.input_tokens or 0,
                output_tokens=output.metrics.output_tokens or 0,
                kind=charge.kind,
                session_id=charge.session_id,
                branch_id=charge.branch_id,
                turn_id=charge.turn_id,
            )
        except Exception:  # the answer is still worth having
            log.exception("the usage of a %s could not be recorded", charge.kind)
    content = output.content if isinstance(output.content, str) else ""
    return output.status == RunStatus.completed, content


_OVERFLOW = re.compile(
    r"context_length_exceeded|context length|context window|context size|maximum context"
    r"|ContextWindowExceeded|too many tokens|prompt is too long|input is too long"
    r"|reduce the length",
    re.I,
)


def is_context_overflow(error: str) -> bool:
    """Whether a model error says the request was longer than the model's window (OpenAI's
    `context_length_exceeded`, and the words vLLM, llama.cpp, Ollama and gateways use)."""
    return bool(_OVERFLOW.search(error or ""))


def max_tool_calls() -> int:
    """AGENT_MAX_TOOL_CALLS, at least 0 (0: the first tool call ends the turn, none runs)."""
    return max(0, settings.AGENT_MAX_TOOL_CALLS)


def model_label(model: Model | None) -> str:
    return DEMO_MODEL_ID if isinstance(model, DemoModel) else str(getattr(model, "id", "model"))
