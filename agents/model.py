"""The one place the model is chosen and configured.

With OPENAI_API_KEY or OPENAI_BASE_URL set, agno's OpenAI-compatible chat model talks to that
server over the Chat Completions API (role `system` for the instructions, which OpenAI and every
compatible server accept). Otherwise the offline demo model answers.

Retries: the openai client retries 408, 409, 429, 5xx, connection errors and timeouts with
exponential backoff (honouring Retry-After) up to AGENT_MAX_RETRIES times; agno's own model
retries stay off so that there is exactly one retry policy.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from .demo_model import DEMO_MODEL_ID, DemoModel


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


def build_model(session_settings: dict | None = None):
    """A fresh agno model for one turn."""
    if is_demo():
        return DemoModel(word_delay=settings.DEMO_MODEL_WORD_DELAY)
    from agno.models.openai.like import OpenAILike

    chosen = model_settings(session_settings)
    return OpenAILike(
        id=chosen["id"],
        name="OpenAI-compatible",
        temperature=chosen["temperature"],
        api_key=settings.OPENAI_API_KEY or "not-needed",
        base_url=settings.OPENAI_BASE_URL or None,
        max_retries=settings.AGENT_MAX_RETRIES,
        timeout=settings.AGENT_TIMEOUT,
        retries=0,
    )


def model_label(model) -> str:
    return DEMO_MODEL_ID if isinstance(model, DemoModel) else str(getattr(model, "id", "model"))
