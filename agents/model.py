"""The one place the model is chosen and configured.

With OPENAI_API_KEY or OPENAI_BASE_URL set, agno's OpenAI-compatible chat model talks to that
server over the Chat Completions API (role `system` for the instructions, which OpenAI and every
compatible server accept). Otherwise the offline demo model answers.

Retries: the openai client retries 408, 409, 429, 5xx, connection errors and timeouts with
exponential backoff (honouring Retry-After) up to AGENT_MAX_RETRIES times; agno's own model
retries stay off so that there is exactly one retry policy.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import openai
from agno.exceptions import ModelProviderError
from agno.models.base import Model
from agno.models.openai.like import OpenAILike
from agno.models.response import ModelResponse
from django.conf import settings

from .demo_model import DEMO_MODEL_ID, DemoModel

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


@dataclass
class ChatModel(OpenAILike):
    """agno's OpenAI-compatible chat model, with errors that say what went wrong."""

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
        try:
            yield from super().invoke_stream(*args, **kwargs)
        except ModelProviderError as exc:
            raise explain(exc, self) from exc

    async def ainvoke_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ModelResponse]:
        try:
            async for delta in super().ainvoke_stream(*args, **kwargs):
                yield delta
        except ModelProviderError as exc:
            raise explain(exc, self) from exc


def is_demo() -> bool:
    return not (settings.OPENAI_API_KEY or settings.OPENAI_BASE_URL)


def _temperature(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return min(max(number, 0.0), 2.0)


def model_settings(session_settings: dict | None = None) -> dict[str, Any]:
    """The model id and temperature for a session: its own settings, else the defaults."""
    chosen = session_settings or {}
    model_id = chosen.get("model")
    if not isinstance(model_id, str) or not model_id.strip():
        model_id = settings.AGENT_MODEL
    return {"id": model_id.strip()[:200], "temperature": _temperature(chosen.get("temperature"))}


def build_model(session_settings: dict | None = None) -> Model:
    """A fresh agno model for one turn."""
    if is_demo():
        return DemoModel(word_delay=settings.DEMO_MODEL_WORD_DELAY)
    chosen = model_settings(session_settings)
    return ChatModel(
        id=chosen["id"],
        name="OpenAI-compatible",
        temperature=chosen["temperature"],
        api_key=settings.OPENAI_API_KEY or "not-needed",
        base_url=settings.OPENAI_BASE_URL or None,
        max_retries=settings.AGENT_MAX_RETRIES,
        timeout=settings.AGENT_TIMEOUT,
        retries=0,
    )


def model_label(model: Model | None) -> str:
    return DEMO_MODEL_ID if isinstance(model, DemoModel) else str(getattr(model, "id", "model"))
