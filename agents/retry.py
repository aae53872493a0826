"""How long the model server asks us to wait before a retry, under every name servers and
gateways give it, and the openai client that waits exactly that.

The openai client reads only `retry-after-ms` and `retry-after`. A gateway renames them: LiteLLM's
proxy forwards every upstream header with an `llm_provider-` prefix (`llm_provider-retry-after`,
`llm_provider-retry-after-ms`), so the client fell back to its own short backoff and asked again
too early. OpenAI itself also says when a used-up limit resets, as a duration
(`x-ratelimit-reset-requests: 6m0s`, `x-ratelimit-reset-tokens: 1.5s`). `retry_after` reads them
all; `Client` and `AsyncClient` are the openai clients whose retry policy uses it.
"""

from __future__ import annotations

import email.utils
import logging
import math
import re
import time
from collections.abc import Mapping
from functools import cached_property
from typing import Any

import httpx2
import openai

from .plain_body import PlainChat

log = logging.getLogger(__name__)

# The longest wait a server may ask for and be retried (the openai client's own limit); a client's
# request timeout (AGENT_TIMEOUT) lowers it. Asked to wait longer, the client does not retry: the
# error says how long the server asked for.
RETRY_AFTER_MAX = 120.0

# The server we talk to, then the upstream behind a LiteLLM proxy.
PREFIXES = ("", "llm_provider-")
LIMITS = ("requests", "tokens")

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """The seconds the response's headers ask to wait before a retry, never negative; None when
    they do not say. Read from, for the server itself and for the upstream behind a LiteLLM
    proxy (`llm_provider-` prefix): `retry-after-ms`, else `retry-after` (seconds, or an HTTP
    date), else the reset of each limit the response says is used up
    (`x-ratelimit-remaining-requests: 0` with `x-ratelimit-reset-requests: 6m0s`; same for
    tokens). When both the gateway and its upstream say, the longer wait wins. Not bounded here:
    the client compares it with its limit (`Client.retry_limit`)."""
    if headers is None:
        return None
    waits = [w for prefix in PREFIXES if (w := _retry_after(headers, prefix, now)) is not None]
    return max(waits) if waits else None


def _retry_after(headers: Mapping[str, str], prefix: str, now: float | None) -> float | None:
    ms = _seconds(headers.get(f"{prefix}retry-after-ms"))
    if ms is not None:
        return ms / 1000
    value = headers.get(f"{prefix}retry-after")
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    if value is not None:
        date = _date(value, now)
        if date is not None:
            return date
    resets = [
        reset
        for limit in LIMITS
        if _used_up(headers.get(f"{prefix}x-ratelimit-remaining-{limit}"))
        and (reset := duration(headers.get(f"{prefix}x-ratelimit-reset-{limit}"))) is not None
    ]
    return max(resets) if resets else None


def _seconds(value: str | None) -> float | None:
    """A number of seconds (or milliseconds), possibly fractional; a negative one is 0."""
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    if math.isnan(number):
        return None
    return max(0.0, number)


def _date(value: str, now: float | None) -> float | None:
    """The seconds until an HTTP date (`Wed, 21 Oct 2026 07:28:00 GMT`); 0 once it passed."""
    try:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        when = email.utils.mktime_tz(parsed)
    except (TypeError, ValueError, OverflowError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def duration(value: str | None) -> float | None:
    """A duration as OpenAI writes its limits' resets ("6m0s", "1.5s", "20ms", "1h2m"), or plain
    seconds ("2"); None when it is neither."""
    if value is None:
        return None
    text = value.strip().lower()
    plain = _seconds(text)
    if plain is not None:
        return plain
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _UNIT[unit] for number, unit in parts)


def _used_up(remaining: str | None) -> bool:
    try:
        return remaining is not None and float(remaining) <= 0
    except ValueError:
        return False


class _RetryAfter:
    """The openai client's retry policy, with the server's wait read by `retry_after`: waited
    exactly (0 included, for a date already passed) when it is at most `retry_limit()`, not
    retried at all when it is longer; the client's own backoff when the server does not say."""

    timeout: Any  # the client's request timeout (float or httpx2.Timeout)

    def retry_limit(self) -> float:
        timeout = self.timeout
        if isinstance(timeout, httpx2.Timeout):
            timeout = timeout.read
        if isinstance(timeout, int | float) and timeout > 0:
            return min(float(timeout), RETRY_AFTER_MAX)
        return RETRY_AFTER_MAX

    def _should_retry(self, response: httpx2.Response) -> bool:
        wait = retry_after(response.headers)
        if wait is not None and wait > self.retry_limit():
            log.info(
                "not retrying: the model server asks to wait %g s, longer than the %g s allowed",
                wait,
                self.retry_limit(),
            )
            return False
        return bool(super()._should_retry(response))  # type: ignore[misc]

    def _calculate_retry_timeout(
        self, remaining_retries: int, options: Any, response_headers: Any = None
    ) -> float:
        wait = retry_after(response_headers)
        if wait is not None:
            wait = min(wait, self.retry_limit())
            log.info("the model server asks to wait %g s before a retry", wait)
            return wait
        return float(super()._calculate_retry_timeout(remaining_retries, options, None))  # type: ignore[misc]


class Client(_RetryAfter, openai.OpenAI):
    """openai's client, waiting before a retry as long as the server asks (`retry_after`); a
    streamed chat completion of plain JSON skips openai's request transform
    (agents.plain_body)."""

    @cached_property
    def chat(self) -> PlainChat:
        return PlainChat(self)


class AsyncClient(_RetryAfter, openai.AsyncOpenAI):
    """openai's async client, waiting before a retry as long as the server asks."""
