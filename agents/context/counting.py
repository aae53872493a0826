"""Counting a request's tokens, offline, from characters (about CHARS_PER_TOKEN per token),
calibrated per model by the input tokens the server reports for the requests it answered, and
the window a request may fill (`Limits`).

What is learned never locks a model out: the calibration is bounded (never more than a token per
character) and forgotten after a while; a refusal as too long makes the count larger for a while
only (at most REFUSAL_MAX times, decaying back by half every REFUSAL_HALF_LIFE seconds), and a
window the server states in its refusal is used for WINDOW_SECONDS.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings
from django.core.cache import cache

from core.model_choice import chosen_context_tokens
from sessions_app.models import Message, Session

CHARS_PER_TOKEN = 3.5  # English prose is about 4, code about 3: err towards counting more
MESSAGE_TOKENS = 4  # each message's role and framing
# The instructions and the tool schemas agno sends with every request (measured: about 7,200
# characters for the built-in tools, the memory, file and plan tools included), with room to
# spare. The L0 lines of the user's memories and the ledger's note come on top (fit_turn's
# `extra_chars`).
SYSTEM_CHARS = 8_400
SAFETY = 0.95  # the share of the window a request may fill by our count
# A server's token is never less than a character: the calibrated ratio stays below the count
# of one token per character, and is forgotten after RATIO_SECONDS without a turn to renew it.
RATIO_MIN, RATIO_MAX = 0.5, CHARS_PER_TOKEN
RATIO_SECONDS = 7 * 24 * 3600
# Each refusal as too long counts REFUSAL_STEP times more, at most REFUSAL_MAX times, and the
# extra halves every REFUSAL_HALF_LIFE seconds; a turn the server answers ends it.
REFUSAL_STEP, REFUSAL_MAX, REFUSAL_HALF_LIFE = 1.5, 2.0, 600.0
WINDOW_SECONDS = 24 * 3600  # a window the server stated is used this long
RETRY_SHARE = 0.75  # a request refused as too long is fitted again within this share


@dataclass
class Limits:
    context: int  # the window
    reserve: int  # the reply's tokens
    share: float = 1.0  # less for a request fitted again after the server refused it as too long

    @property
    def usable(self) -> int:
        """Tokens (by our count) a request may take."""
        return int((int(self.context * SAFETY) - self.reserve) * self.share)


def limits_for(session: Session, model: str | None = None, *, retry: bool = False) -> Limits:
    """The window (the configured one, or smaller when the model's server said so) and the
    reply's reserve; with `retry`, a smaller share of it, for a request the server refused."""
    context = chosen_context_tokens(session.settings) or settings.AGENT_CONTEXT_TOKENS
    learned = cache.get(_window_key(model)) if model else None
    if isinstance(learned, int) and 0 < learned < context:
        context = learned
    reserve = max(0, settings.AGENT_MAX_OUTPUT_TOKENS)
    return Limits(context=context, reserve=reserve, share=RETRY_SHARE if retry else 1.0)


def _ratio_key(model: str) -> str:
    return f"rollback:context:ratio:{model}"[:200]


def _refusal_key(model: str) -> str:
    return f"rollback:context:refusals:{model}"[:200]


def _calibrated(model: str) -> float:
    value = cache.get(_ratio_key(model))
    return min(RATIO_MAX, max(RATIO_MIN, float(value))) if isinstance(value, int | float) else 1.0


def refusal_factor(model: str, *, now: float | None = None) -> float:
    """How much more we count after the server's recent refusals as too long: 1.0 without
    any, at most REFUSAL_MAX, halving back towards 1.0 every REFUSAL_HALF_LIFE seconds."""
    value = cache.get(_refusal_key(model))
    if not (isinstance(value, tuple | list) and len(value) == 2):
        return 1.0
    factor, at = float(value[0]), float(value[1])
    age = max(0.0, (time.time() if now is None else now) - at)
    decay = float(0.5 ** (age / REFUSAL_HALF_LIFE))  # float ** float is typed Any
    return 1.0 + (min(REFUSAL_MAX, factor) - 1.0) * decay


def ratio_for(model: str) -> float:
    """How many of the server's tokens one of ours is worth, for this model (1.0 until the
    server has reported usage or refused a request), never more than a token per character."""
    return min(RATIO_MAX, _calibrated(model) * refusal_factor(model))


def calibrate(model: str, *, estimated: int, reported: int | None) -> None:
    """Learn from the input tokens the server reported for a request we estimated: what it
    counts is known now, so the extra count of earlier refusals ends. Small requests say
    little (the framing dominates): they are ignored."""
    if not reported or reported <= 0 or estimated < 200:
        return
    observed = min(RATIO_MAX, max(RATIO_MIN, reported / estimated))
    previous = cache.get(_ratio_key(model))
    ratio = observed if not isinstance(previous, int | float) else 0.5 * previous + 0.5 * observed
    cache.set(_ratio_key(model), ratio, timeout=RATIO_SECONDS)
    cache.delete(_refusal_key(model))


_STATED_WINDOW = re.compile(
    r"(?:maximum context length|context (?:length|window|size)|max(?:imum)? tokens?)"
    r"\D{0,20}?(\d[\d,]{2,})",
    re.I,
)


def _window_key(model: str) -> str:
    return f"rollback:context:window:{model}"[:200]


def overflowed(model: str, error: str = "", *, window: int | None = None) -> bool:
    """The server refused a request as too long for its window. When its error states a
    window ("maximum context length is 8192 tokens") smaller than the one we knew, that window
    is used for WINDOW_SECONDS. True when the stated window is smaller than the request's
    (`window`; by default, than the one we knew): the request is to be fitted to it. Otherwise
    our count fell short, and we count more for a while (refusal_factor)."""
    match = _STATED_WINDOW.search(error or "")
    stated = int(match.group(1).replace(",", "")) if match else 0
    known = cache.get(_window_key(model))
    learned = stated >= 256 and (not isinstance(known, int) or stated < known)
    if learned:
        cache.set(_window_key(model), stated, timeout=WINDOW_SECONDS)
    if learned if window is None else 256 <= stated < window:
        return True
    now = time.time()
    factor = min(REFUSAL_MAX, refusal_factor(model, now=now) * REFUSAL_STEP)
    timeout = int(REFUSAL_HALF_LIFE * 8)  # by then the extra is gone (1/256 of it is left)
    cache.set(_refusal_key(model), (factor, now), timeout=timeout)
    return False


def tokens(chars: int, *, messages: int = 0, ratio: float = 1.0) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN * ratio) + messages * MESSAGE_TOKENS


class Counted(Protocol):
    """A message as counted: a stored one, or one about to be (sessions_app.turns.NewMessage)."""

    role: str
    content: str
    tool_result: str
    tool_calls: Any


def message_chars(m: Counted) -> int:
    text = m.tool_result if m.role == Message.Role.TOOL and m.tool_result else m.content
    return len(text or "") + (len(str(m.tool_calls)) if m.tool_calls else 0)
