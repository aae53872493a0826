"""Which model a session may ask for, at what temperature, and with what instructions.

Every model request is billed to the operator's key, so a session (`metadata.settings.model`,
`metadata.settings.temperature`) may choose only among the models the operator allows:
AGENT_ALLOWED_MODELS (AGENT_MODEL alone by default; AGENT_MODEL is always allowed, and the demo
model's id while the demo model answers), at a temperature from 0 to 2, OpenAI's range. The
services check a session's settings when it is created, updated or imported; the agent checks
them again before each turn, so a session stored before the list changed cannot call a model
no longer allowed.

A session's `metadata.settings.instructions` and a user's `metadata.preferences.instructions`
are the owner's own text added to the agent's instructions (agents.instructions): text of at
most INSTRUCTIONS_MAX_CHARS characters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypedDict

from django.conf import settings

from core.errors import InvalidInput

DEMO_MODEL_ID = "rollback-demo"
DEMO_MODEL_NAME = "Offline demo model"  # what the pages call it (the header's label, the picker)
TEMPERATURE_MIN, TEMPERATURE_MAX = 0.0, 2.0


def is_demo() -> bool:
    """No model server is configured: the offline demo model answers."""
    return not (settings.OPENAI_API_KEY or settings.OPENAI_BASE_URL)


def allowed_models() -> list[str]:
    models = [settings.AGENT_MODEL, *settings.AGENT_ALLOWED_MODELS]
    if is_demo():
        models.append(DEMO_MODEL_ID)
    return list(dict.fromkeys(models))


def chosen_model(session_settings: Mapping[str, object]) -> str | None:
    """The model id the session's settings ask for (None: the default), if it is allowed."""
    value = session_settings.get("model")
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InvalidInput("The session's model (settings.model) must be text.")
    allowed = allowed_models()
    if value.strip() not in allowed:
        raise InvalidInput(
            f"The model {value.strip()[:200]!r} is not allowed here; "
            f"a session may use: {', '.join(allowed)}."
        )
    return value.strip()


def regenerate_models() -> list[str]:
    """The models a reply may be regenerated with (the reply menu's "Regenerate with…"): the
    allowed ones; none while the demo model answers, since it answers whatever is asked."""
    return [] if is_demo() else allowed_models()


def turn_model(value: object) -> str | None:
    """A model asked for by one turn only (a reply regenerated with another model; the
    session's own choice is unchanged): None for none, else one of `allowed_models`. Anything
    else is refused (InvalidInput), so it is never called."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    allowed = allowed_models()
    if not isinstance(value, str) or value.strip() not in allowed:
        shown = value.strip()[:200] if isinstance(value, str) else value
        raise InvalidInput(
            f"The model {shown!r} is not allowed here; a reply may be regenerated with: "
            f"{', '.join(allowed)}."
        )
    return value.strip()


def chosen_temperature(session_settings: Mapping[str, object]) -> float | None:
    """The temperature the session's settings ask for (None: the default), if it is in range."""
    value = session_settings.get("temperature")
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not TEMPERATURE_MIN <= value <= TEMPERATURE_MAX
    ):
        raise InvalidInput(
            f"The session's temperature (settings.temperature) must be a number from "
            f"{TEMPERATURE_MIN:g} to {TEMPERATURE_MAX:g}."
        )
    return float(value)


class ModelSettings(TypedDict):
    id: str
    temperature: float | None


def model_settings(
    session_settings: Mapping[str, object] | None = None,
    *,
    default_id: str | None = None,
    default_temperature: float | None = None,
) -> ModelSettings:
    """The model id and temperature for a session: its own settings, else the defaults (the
    caller's, else AGENT_MODEL and the server's temperature). A model or temperature the session
    may not use raises InvalidInput, so it is never called. (agents.model.build_model makes the
    model from these.)"""
    chosen = session_settings or {}
    temperature = chosen_temperature(chosen)
    return {
        "id": chosen_model(chosen) or default_id or settings.AGENT_MODEL,
        "temperature": default_temperature if temperature is None else temperature,
    }


def model_id_for(session_settings: Mapping[str, object] | None) -> str:
    """The id of the model a session's turns use (InvalidInput as `model_settings`)."""
    return DEMO_MODEL_ID if is_demo() else model_settings(session_settings)["id"]


CONTEXT_TOKENS_MIN, CONTEXT_TOKENS_MAX = 256, 10_000_000


def chosen_context_tokens(session_settings: Mapping[str, object]) -> int | None:
    """The context window the session's settings give its model (None: AGENT_CONTEXT_TOKENS)."""
    value = session_settings.get("context_tokens")
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not CONTEXT_TOKENS_MIN <= value <= CONTEXT_TOKENS_MAX
    ):
        raise InvalidInput(
            f"The session's context window (settings.context_tokens) must be a whole number of "
            f"tokens from {CONTEXT_TOKENS_MIN} to {CONTEXT_TOKENS_MAX:,}."
        )
    return value


INSTRUCTIONS_MAX_CHARS = 8_000


def clean_instructions(value: object, *, what: str) -> str:
    """Custom instructions as stored: text of at most INSTRUCTIONS_MAX_CHARS characters, without
    NUL characters, trimmed; "" (none) for None or blank text. `what` names the field in the
    message of the InvalidInput that refuses anything else."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"The {what} must be text.")
    text = value.strip()
    if "\x00" in text:
        raise InvalidInput(f"The {what} cannot contain NUL characters.")
    if len(text) > INSTRUCTIONS_MAX_CHARS:
        raise InvalidInput(
            f"The {what} are {len(text):,} characters long; the limit is "
            f"{INSTRUCTIONS_MAX_CHARS:,}."
        )
    return text


def chosen_instructions(session_settings: Mapping[str, object]) -> str:
    """The session's own instructions (settings.instructions; "" for none), if they are valid."""
    return clean_instructions(
        session_settings.get("instructions"),
        what="session's instructions (settings.instructions)",
    )


def check_model_settings(metadata: object) -> None:
    """Refuse session metadata whose settings ask for a model or temperature not allowed, or
    hold instructions that are not text within INSTRUCTIONS_MAX_CHARS."""
    chosen = metadata.get("settings") if isinstance(metadata, dict) else None
    if isinstance(chosen, dict):
        chosen_model(chosen)
        chosen_temperature(chosen)
        chosen_context_tokens(chosen)
        chosen_instructions(chosen)
        chosen_mcp_servers(chosen)
        chosen_test_command(chosen)
        chosen_checkpoint_each_message(chosen)


def chosen_mcp_servers(session_settings: Mapping[str, object]) -> dict[str, bool]:
    """The session's MCP servers turned on or off in its Tools menu (settings.mcp_servers: an
    object of server names to true or false; agents.mcp.access reads it)."""
    value = session_settings.get("mcp_servers")
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and len(k) <= 40 and isinstance(v, bool) for k, v in value.items()
    ):
        raise InvalidInput(
            "The session's MCP servers (settings.mcp_servers) must be an object of server "
            "names to true or false."
        )
    return dict(value)


TEST_COMMAND_MAX_CHARS = 2_000


def chosen_checkpoint_each_message(session_settings: Mapping[str, object]) -> bool | None:
    """Whether the session takes a checkpoint before each message its owner sends
    (settings.checkpoint_each_message: true or false; None when absent, and the owner's
    preference decides)."""
    value = session_settings.get("checkpoint_each_message")
    if value is None or isinstance(value, bool):
        return value
    raise InvalidInput(
        "The session's checkpoint before each message (settings.checkpoint_each_message) must "
        "be true or false."
    )


def chosen_test_command(session_settings: Mapping[str, object]) -> str:
    """The session's test command (settings.test_command, which the agent's run_tests runs in
    the sandbox; "" for none): one line of text of at most TEST_COMMAND_MAX_CHARS characters."""
    value = session_settings.get("test_command")
    if value is None:
        return ""
    if not isinstance(value, str) or "\x00" in value or len(value) > TEST_COMMAND_MAX_CHARS:
        raise InvalidInput(
            "The session's test command (settings.test_command) must be text of at most "
            f"{TEST_COMMAND_MAX_CHARS:,} characters, e.g. python3 -m unittest."
        )
    return value.strip()
