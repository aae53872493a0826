"""A model server's errors in words a user can act on: what the server said (inside a stream
too), how many attempts were made, a hint per HTTP status; never the server's address or key
(`redact`): users see these texts.
"""

from __future__ import annotations

import json
import logging
from urllib.parse import urlsplit

import openai
from agno.exceptions import ModelProviderError
from agno.models.openai.like import OpenAILike
from django.conf import settings

from .retry import retry_after

log = logging.getLogger("agents.model")  # the name it logged under in agents.model

_HINTS = {
    401: "check OPENAI_API_KEY",
    403: "check OPENAI_API_KEY and the model's access rights",
    404: "check the model name (AGENT_MODEL or the session's model) and OPENAI_BASE_URL",
    429: "the server is rate limiting; try again in a moment",
}

# The most characters of a server's own error message put in a turn's error.
SERVER_MESSAGE_CHARS = 500


def attempts(cause: BaseException | None) -> int:
    """How many requests the openai client really sent for the call that failed with `cause`:
    it numbers its retries in the `x-stainless-retry-count` header of each request."""
    request = getattr(cause, "request", None)
    headers = getattr(request, "headers", None)
    try:
        return int(headers.get("x-stainless-retry-count", 0)) + 1 if headers is not None else 1
    except (TypeError, ValueError):
        return 1


def stream_error(cause: BaseException | None) -> str | None:
    """The message of an error the server sent inside a stream (`data: {"error": {...}}`), for
    which the openai client raises a plain APIError; None for any other error. Bounded to
    SERVER_MESSAGE_CHARS characters."""
    if not isinstance(cause, openai.APIError) or isinstance(
        cause, openai.APIStatusError | openai.APIConnectionError | openai.APIResponseValidationError
    ):
        return None
    body = cause.body
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message.strip():
        message = cause.message
    message = " ".join(message.split())
    if len(message) > SERVER_MESSAGE_CHARS:
        message = message[: SERVER_MESSAGE_CHARS - 1] + "…"
    return message or "no message"


def explain(
    exc: ModelProviderError, model: OpenAILike, *, streamed: bool = False
) -> ModelProviderError:
    """The provider error in words a user can act on (agno keeps only the server's message).
    The model server's address is logged, never put in the text: users see this text.
    `streamed`: some of the answer's text had arrived."""
    cause = exc.__cause__
    tries = attempts(cause)
    after = f" after {tries} attempts" if tries > 1 else ""
    reported = stream_error(cause)
    if reported is not None:
        where = "in the middle of its answer" if streamed else "instead of an answer"
        text = f"the model server sent an error {where}: {reported}"
    elif isinstance(cause, openai.APITimeoutError):
        text = f"the model server did not answer within {model.timeout:g} s{after}"
    elif isinstance(cause, openai.APIConnectionError):
        log.warning(
            "the connection to the model server at %s failed: %s",
            model.base_url or "api.openai.com",
            cause,
        )
        text = f"the connection to the model server failed{after}"
    elif isinstance(cause, openai.APIStatusError):
        status = cause.status_code
        hint = _HINTS.get(status) or ("a server error" if status >= 500 else "")
        wait = retry_after(cause.response.headers)
        if status == 429 and wait is not None:
            hint = f"the server is rate limiting; it asks to wait {round(wait, 1):g} s"
        text = f"the model server answered HTTP {status}{after}: {exc.message}"
        if hint:
            text += f" ({hint})"
    elif isinstance(cause, json.JSONDecodeError | ValueError):
        text = f"the model server sent an answer that could not be read ({cause})"
    else:
        text = exc.message
    # The same class (agno's ContextWindowExceededError stays one), with a readable text.
    return type(exc)(
        message=redact(text), status_code=exc.status_code, model_name=model.name, model_id=model.id
    )


def redact(text: str) -> str:
    """`text` without the model server's address or key (OPENAI_BASE_URL, OPENAI_API_KEY),
    for anything a user sees: an error from a library may quote either."""
    secrets = []
    key = settings.OPENAI_API_KEY
    if key and len(key) >= 4:
        secrets.append((key, "[the API key]"))
    base = settings.OPENAI_BASE_URL
    if base:
        parts = urlsplit(base)
        secrets += [(base.rstrip("/"), "[the model server]")]
        if parts.netloc:
            secrets.append((parts.netloc, "[the model server]"))
        if parts.hostname:
            secrets.append((parts.hostname, "[the model server]"))
    for secret, placeholder in secrets:
        text = text.replace(secret, placeholder)
    return text
