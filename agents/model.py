"""The one place the model is chosen and configured.

With OPENAI_API_KEY or OPENAI_BASE_URL set, agno's OpenAI-compatible chat model talks to that
server over the Chat Completions API (role `system` for the instructions, which OpenAI and every
compatible server accept). Otherwise the offline demo model answers.

Each request carries max_tokens (AGENT_MAX_OUTPUT_TOKENS), and a streamed response is cut at
AGENT_MAX_REPLY_CHARS characters whatever the server sends (turns always stream).

Retries: the openai client retries 408, 409, 429, 5xx, connection errors and timeouts with
exponential backoff (honouring Retry-After) up to AGENT_MAX_RETRIES times; agno's own model
retries stay off so that there is exactly one retry policy.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import openai
from agno.exceptions import ModelProviderError
from agno.models.base import Model
from agno.models.openai.like import OpenAILike
from agno.models.response import ModelResponse
from django.conf import settings

from core.model_choice import DEMO_MODEL_ID, chosen_model, chosen_temperature, is_demo

from .demo_model import DemoModel

_HINTS = {
    401: "check OPENAI_API_KEY",
    403: "check OPENAI_API_KEY and the model's access rights",
    404: "check the model name (AGENT_MODEL or the session's model) and OPENAI_BASE_URL",
    429: "the server is rate limiting; try again in a moment",
}


def explain(exc: ModelProviderError, model: ChatModel) -> ModelProviderError:
    """The provider error in words a user can act on (agno keeps only the server's message)."""
    cause = exc.__cause__
    retries = f" (after {model.max_retries} retries)" if model.max_retries else ""
    if isinstance(cause, openai.APITimeoutError):
        text = f"the model server did not answer within {model.timeout:g} s{retries}"
    elif isinstance(cause, openai.APIConnectionError):
        where = model.base_url or "api.openai.com"
        text = f"the connection to the model server at {where} failed{retries}"
    elif isinstance(cause, openai.APIStatusError):
        status = cause.status_code
        hint = _HINTS.get(status) or ("a server error" if status >= 500 else "")
        retried = retries if status in (408, 409, 429) or status >= 500 else ""
        text = f"the model server answered HTTP {status}{retried}: {exc.message}"
        if hint:
            text += f" ({hint})"
    elif isinstance(cause, json.JSONDecodeError | ValueError):
        text = f"the model server sent an answer that could not be read ({cause})"
    else:
        text = exc.message
    return ModelProviderError(
        message=text, status_code=exc.status_code, model_name=model.name, model_id=model.id
    )


def _side_chars(delta: ModelResponse) -> int:
    """The characters of a streamed delta besides its text: tool-call arguments and reasoning."""
    count = len(delta.reasoning_content or "")
    for call in delta.tool_calls or []:
        function = (
            call.get("function") if isinstance(call, dict) else getattr(call, "function", None)
        )
        arguments = (
            function.get("arguments")
            if isinstance(function, dict)
            else getattr(function, "arguments", None)
        )
        count += len(arguments) if isinstance(arguments, str) else 0
    return count


class _ReplyBound:
    """Counts one streamed response against the model's `max_reply_chars`."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.used = 0

    def take(self, delta: ModelResponse) -> bool:
        """Count `delta`, cutting its text to what is left; True when the stream must stop
        after it. Tool-call arguments or reasoning past the limit fail the response."""
        limit = self.model.max_reply_chars
        self.used += _side_chars(delta)
        if self.used > limit:
            raise ModelProviderError(
                message=f"the model's answer passed the limit of {limit} characters "
                "(AGENT_MAX_REPLY_CHARS) before its text; it was stopped",
                model_name=self.model.name,
                model_id=self.model.id,
            )
        if not isinstance(delta.content, str):
            return False
        if self.used + len(delta.content) > limit:
            delta.content = delta.content[: limit - self.used]
            self.model.cut_off = "chars"
            return True
        self.used += len(delta.content)
        return False


@dataclass
class ChatModel(OpenAILike):
    """agno's OpenAI-compatible chat model, with errors that say what went wrong and streamed
    responses of at most `max_reply_chars` characters: a longer one is cut there and its
    request closed. `cut_off` says whether the last streamed response was cut short, by this
    bound ("chars") or by the server's own limit, max_tokens ("tokens")."""

    max_reply_chars: int = 200_000
    cut_off: str | None = None

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

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        self.cut_off = None
        bound = _ReplyBound(self)
        stream = super().invoke_stream(*args, **kwargs)
        try:
            for delta in stream:
                stop = bound.take(delta)
                yield delta
                if stop:
                    return
        except ModelProviderError as exc:
            raise explain(exc, self) from exc
        finally:
            close = getattr(stream, "close", None)  # a generator: ends the request to the server
            if close is not None:
                close()

    async def ainvoke_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ModelResponse]:
        self.cut_off = None
        bound = _ReplyBound(self)
        stream = super().ainvoke_stream(*args, **kwargs)
        try:
            async for delta in stream:
                stop = bound.take(delta)
                yield delta
                if stop:
                    return
        except ModelProviderError as exc:
            raise explain(exc, self) from exc
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    def _parse_provider_response_delta(self, response_delta: Any) -> ModelResponse:
        if any(choice.finish_reason == "length" for choice in response_delta.choices or []):
            self.cut_off = self.cut_off or "tokens"
        return super()._parse_provider_response_delta(response_delta)


def reply_cut_off(model: Model | None) -> bool:
    """Whether the model's last streamed response was cut short by a length limit."""
    return isinstance(model, ChatModel) and model.cut_off is not None


def model_settings(
    session_settings: dict | None = None,
    *,
    default_id: str | None = None,
    default_temperature: float | None = None,
) -> dict[str, Any]:
    """The model id and temperature for a session: its own settings, else the defaults (the
    caller's, else AGENT_MODEL and the server's temperature). A model or temperature the session
    may not use raises InvalidInput (core.model_choice), so it is never called."""
    chosen = session_settings or {}
    temperature = chosen_temperature(chosen)
    return {
        "id": chosen_model(chosen) or default_id or settings.AGENT_MODEL,
        "temperature": default_temperature if temperature is None else temperature,
    }


def build_model(
    session_settings: dict | None = None,
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
    return ChatModel(
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
    )


def model_id_for(session_settings: dict | None) -> str:
    """The id of the model a session's turns use (InvalidInput as build_model)."""
    return DEMO_MODEL_ID if is_demo() else model_settings(session_settings)["id"]


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


def model_label(model: Model | None) -> str:
    return DEMO_MODEL_ID if isinstance(model, DemoModel) else str(getattr(model, "id", "model"))
