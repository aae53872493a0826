"""Keeping each request within the model's context window.

A request holds the instructions and tool schemas, the branch's history, the new message, and
leaves room for the reply (AGENT_MAX_OUTPUT_TOKENS, sent as max_tokens). The window is
AGENT_CONTEXT_TOKENS, or the session's `settings.context_tokens`.

When the history does not fit, its older part is replaced by a summary the model writes, and the
newest messages are sent whole; a tool exchange (an assistant's tool calls and their results) is
never split. A long prefix is summarised in pieces that each fit the window, each summary
building on the last; every summary is stored (sessions_app.models.Summary) against the last
message it covers, so it serves every branch that shares that prefix and is never made twice.
Before anything is summarised, large results of old tool calls are shortened in the request.

Tokens are counted offline, from characters (about CHARS_PER_TOKEN per token), and calibrated
per model by the input tokens the server reports for the requests it answered.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache

from core.errors import InvalidInput
from core.model_choice import chosen_context_tokens
from sessions_app.models import ExternalSession, InternalSession, Message, Summary
from sessions_app.selectors import branch_history, history_size, lineage_summary
from sessions_app.services import summary_store

from .demo_model import SUMMARY_MARKER
from .model import ask_once, build_model, is_context_overflow, model_id_for, model_label

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 3.5  # English prose is about 4, code about 3: err towards counting more
MESSAGE_TOKENS = 4  # each message's role and framing
# The instructions and the tool schemas agno sends with every request (measured: about 4,500
# characters for the built-in tools, the memory tools included), with room to spare. The L0
# lines of the user's memories come on top (fit_turn's `extra_chars`).
SYSTEM_CHARS = 5_400
SAFETY = 0.95  # the share of the window a request may fill by our count
KEEP_SHARE = 0.5  # after summarising, the newest messages fill at most this share of what is left
SUMMARY_MAX_TOKENS = 1_024
SUMMARY_PROMPT_CHARS = 800
TOOL_RESULT_KEEP_CHARS = 1_200  # old tool results longer than this are shortened in requests
RECENT_UNITS = 2  # the newest exchanges keep their tool results whole
RATIO_MIN, RATIO_MAX = 0.5, 4.0

SUMMARY_INSTRUCTIONS = (
    f"{SUMMARY_MARKER}. You get the summary so far (if any) and the next part of the "
    "conversation. Write one updated summary that keeps every fact, decision, name, number, "
    "open question and piece of code the conversation may need later, and what the tools "
    "returned. Write it as plain notes, in the conversation's language, without a preamble."
)


class ContextTooSmall(InvalidInput):
    """The window cannot hold even the new message with the reply's reserve."""


class SummaryFailed(Exception):
    """The model could not summarise the older messages (`overflow`: its request was refused
    as too long for the model's window)."""

    def __init__(self, reason: str, *, overflow: bool = False) -> None:
        super().__init__(reason)
        self.overflow = overflow


@dataclass
class Limits:
    context: int  # the window
    reserve: int  # the reply's tokens

    @property
    def usable(self) -> int:
        """Tokens (by our count) a request may take."""
        return int(self.context * SAFETY) - self.reserve


def limits_for(session: ExternalSession, model: str | None = None) -> Limits:
    """The window (the configured one, or smaller when the model's server said so) and the
    reply's reserve."""
    context = chosen_context_tokens(session.settings) or settings.AGENT_CONTEXT_TOKENS
    learned = cache.get(_window_key(model)) if model else None
    if isinstance(learned, int) and 0 < learned < context:
        context = learned
    reserve = max(0, settings.AGENT_MAX_OUTPUT_TOKENS)
    return Limits(context=context, reserve=reserve)


# --- counting ------------------------------------------------------------------------------


def _ratio_key(model: str) -> str:
    return f"rollback:context:ratio:{model}"[:200]


def ratio_for(model: str) -> float:
    """How many of the server's tokens one of ours is worth, for this model (1.0 until the
    server has reported usage)."""
    value = cache.get(_ratio_key(model))
    return float(value) if isinstance(value, int | float) else 1.0


def calibrate(model: str, *, estimated: int, reported: int | None) -> None:
    """Learn from the input tokens the server reported for a request we estimated. Small
    requests say little (the framing dominates): they are ignored."""
    if not reported or reported <= 0 or estimated < 200:
        return
    observed = min(RATIO_MAX, max(RATIO_MIN, reported / estimated))
    previous = cache.get(_ratio_key(model))
    ratio = observed if not isinstance(previous, int | float) else 0.5 * previous + 0.5 * observed
    cache.set(_ratio_key(model), ratio, timeout=None)


_STATED_WINDOW = re.compile(
    r"(?:maximum context length|context (?:length|window|size)|max(?:imum)? tokens?)"
    r"\D{0,20}?(\d[\d,]{2,})",
    re.I,
)


def _window_key(model: str) -> str:
    return f"rollback:context:window:{model}"[:200]


def overflowed(model: str, error: str = "") -> None:
    """The server refused a request as too long for its window. When its error states the
    window ("maximum context length is 8192 tokens"), that window is used from now on;
    otherwise we count more."""
    match = _STATED_WINDOW.search(error or "")
    stated = int(match.group(1).replace(",", "")) if match else 0
    known = cache.get(_window_key(model))
    if stated >= 256 and (not isinstance(known, int) or stated < known):
        cache.set(_window_key(model), stated, timeout=None)
    else:
        cache.set(_ratio_key(model), min(RATIO_MAX, ratio_for(model) * 1.5), timeout=None)


def tokens(chars: int, *, messages: int = 0, ratio: float = 1.0) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN * ratio) + messages * MESSAGE_TOKENS


def _chars(m: Message) -> int:
    text = m.tool_result if m.role == Message.Role.TOOL and m.tool_result else m.content
    return len(text or "") + (len(str(m.tool_calls)) if m.tool_calls else 0)


def _units(history: list[Message]) -> list[list[Message]]:
    """The history in units that are never split: an assistant message with tool calls and
    the tool results that answer it, or a single message."""
    units: list[list[Message]] = []
    for m in history:
        if m.role == Message.Role.TOOL and units and units[-1][0].tool_calls:
            units[-1].append(m)
        else:
            units.append([m])
    return units


def _shorten_old_tool_results(units: list[list[Message]]) -> None:
    """Shorten, in the request only, the large results of tool calls older than the newest
    exchanges (the stored messages are untouched)."""
    for unit in units[:-RECENT_UNITS]:
        for m in unit:
            text = m.tool_result or m.content
            if m.role == Message.Role.TOOL and len(text) > TOOL_RESULT_KEEP_CHARS:
                short = (
                    text[:TOOL_RESULT_KEEP_CHARS]
                    + f"\n… [shortened for the model: {len(text):,} characters in all]"
                )
                m.tool_result = m.content = short


# --- fitting a turn ------------------------------------------------------------------------


@dataclass
class Fit:
    """What a turn sends: the summary (or none) and the history after it."""

    history: list[Message]
    summary: Summary | None
    view_start: int  # the position of the first message the model sees whole
    tokens: int  # the request by our count, before calibration
    limits: Limits
    made: list[Summary] = field(default_factory=list)  # summaries written for this turn
    ratio: float = 1.0

    @property
    def raw_tokens(self) -> int:
        """The request by our uncalibrated count."""
        return round(self.tokens / self.ratio)

    @property
    def context_note(self) -> str | None:
        """The summary as the instructions carry it."""
        if self.summary is None:
            return None
        return (
            "<earlier_conversation_summary>\n"
            f"The first {self.summary.end_position} messages of this conversation are "
            "summarised here; the messages after them follow in full.\n"
            f"{self.summary.content}\n"
            "</earlier_conversation_summary>"
        )

    def record(self) -> dict[str, Any]:
        return {
            "budget": self.limits.context,
            "reserve": self.limits.reserve,
            "tokens": self.tokens,
            "view_start": self.view_start,
            "summary": self.summary.pk if self.summary is not None else None,
            "summaries_made": len(self.made),
        }


def fit_turn(
    *,
    session: ExternalSession,
    branch: InternalSession,
    end: int,
    message: str,
    model: str,
    stop: Callable[[], bool] = lambda: False,
    extra_chars: int = 0,
) -> Fit:
    """The history to send for a turn whose user message sits at `end`, summarising what does
    not fit; `extra_chars` more of instructions (the user's memories) are sent too.
    ContextTooSmall when the window cannot hold the message and the reply's reserve;
    SummaryFailed when a needed summary could not be written."""
    limits = limits_for(session, model)
    ratio = ratio_for(model)
    fixed = tokens(SYSTEM_CHARS + extra_chars + len(message), messages=2, ratio=ratio)
    if fixed > limits.usable:
        raise ContextTooSmall(
            f"This message needs about {fixed:,} tokens with the instructions, and the reply "
            f"keeps {limits.reserve:,} (AGENT_MAX_OUTPUT_TOKENS): more than the model's window "
            f"of {limits.context:,} tokens (AGENT_CONTEXT_TOKENS or the session's "
            "settings.context_tokens). Shorten the message, or raise the window."
        )
    summary = lineage_summary(branch, end=end)
    summary_budget = _summary_budget(limits, fixed)
    made: list[Summary] = []
    while True:
        start = summary.end_position if summary is not None else 0
        history = branch_history(branch, start=start, end=end)
        units = _units(history)
        room = limits.usable - fixed - _summary_tokens(summary, ratio)
        sizes = _sizes(units, ratio)
        if sum(sizes) > room:  # first, shorten the large results of old tool calls
            _shorten_old_tool_results(units)
            sizes = _sizes(units, ratio)
        if sum(sizes) <= room:
            used = fixed + _summary_tokens(summary, ratio) + sum(sizes)
            return Fit(history, summary, start, used, limits, made, ratio)
        # Keep the newest units whole, within a share of what a summary leaves; summarise the rest.
        after_summary = limits.usable - fixed - summary_budget
        keep_room = max(0, int(after_summary * KEEP_SHARE))
        kept, total = 0, 0
        for size in reversed(sizes):
            if total + size > keep_room:
                break
            total += size
            kept += 1
        older = units[: len(units) - kept]
        if not older:  # only when a stored summary is longer than a new one may be: send as is
            return Fit(history, summary, start, fixed + total, limits, made, ratio)
        summary = _summarise(
            session=session,
            branch=branch,
            units=older,
            previous=summary,
            limits=limits,
            reply_tokens=summary_budget,
            model=model,
            ratio=ratio,
            stop=stop,
            made=made,
        )


def _sizes(units: list[list[Message]], ratio: float) -> list[int]:
    return [tokens(sum(_chars(m) for m in u), messages=len(u), ratio=ratio) for u in units]


def _summary_tokens(summary: Summary | None, ratio: float) -> int:
    if summary is None:
        return 0
    return tokens(len(summary.content) + 200, ratio=ratio)


def _summary_budget(limits: Limits, fixed: int) -> int:
    """The tokens a summary may take (its reply limit), a quarter of what the new message
    leaves at most."""
    return max(64, min(SUMMARY_MAX_TOKENS, (limits.usable - fixed) // 4))


def _transcript(m: Message, limit: int) -> str:
    if m.role == Message.Role.TOOL:
        text = f"tool {m.tool_name or ''} returned: {m.tool_result or m.content}"
    elif m.tool_calls:
        calls = ", ".join(
            f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})"
            for c in m.tool_calls
            if isinstance(c, dict)
        )
        text = f"{m.role}: {m.content} [called {calls}]".replace(":  [", ": [")
    else:
        text = f"{m.role}: {m.content}"
    text = " ".join(text.split("\n\n"))
    return text if len(text) <= limit else text[:limit] + " …"


def _summarise(
    *,
    session: ExternalSession,
    branch: InternalSession,
    units: list[list[Message]],
    previous: Summary | None,
    limits: Limits,
    reply_tokens: int,
    model: str,
    ratio: float,
    stop: Callable[[], bool],
    made: list[Summary],
) -> Summary:
    """Summarise `units` (the history after `previous`) in pieces that each fit the window,
    each summary at most `reply_tokens` long; each piece's summary is stored as soon as it is
    written. Returns the last."""
    # What one summarising request may hold besides the earlier summary: its window, less the
    # summary's reply, the instructions and the earlier summary (at most a reply's worth).
    piece_chars = int(
        (int(limits.context * SAFETY) - 2 * reply_tokens) / ratio * CHARS_PER_TOKEN
        - SUMMARY_PROMPT_CHARS
    )
    if piece_chars < 400:
        raise ContextTooSmall(
            f"The model's window of {limits.context:,} tokens is too small to summarise the "
            "earlier messages of this conversation. Raise AGENT_CONTEXT_TOKENS (or the "
            "session's settings.context_tokens)."
        )
    pieces: list[list[Message]] = [[]]
    size = 0
    for unit in units:
        lines = sum(min(len(_transcript(m, piece_chars)), piece_chars) + 1 for m in unit)
        if pieces[-1] and size + lines > piece_chars:
            pieces.append([])
            size = 0
        pieces[-1].extend(unit)
        size += lines
    summariser = build_model(session.settings, max_tokens=reply_tokens)
    summary = previous
    for piece in pieces:
        if stop():
            raise SummaryFailed("the turn was stopped")
        per_message = max(200, piece_chars // max(1, len(piece)))
        text = "\n".join(_transcript(m, per_message) for m in piece)[:piece_chars]
        earlier = f"<summary>\n{summary.content}\n</summary>\n\n" if summary is not None else ""
        prompt = (
            f"{earlier}The conversation continues:\n{text}\n\n"
            "Write the updated summary of the whole conversation so far."
        )
        answered, content = ask_once(summariser, SUMMARY_INSTRUCTIONS, prompt)
        if not answered or not content.strip():
            reason = content.strip() or "it sent no summary"
            overflow = not answered and is_context_overflow(reason)
            if overflow:
                overflowed(model, reason)
            raise SummaryFailed(reason[:500], overflow=overflow)
        end = piece[-1].position + 1
        summary = summary_store(
            branch=branch,
            end=end,
            content=content.strip(),
            model=model_label(summariser),
            metadata={
                "tokens": tokens(len(content)),
                "source_messages": len(piece),
                "previous": previous.pk if previous is not None else None,
            },
        )
        made.append(summary)
        previous = summary
        log.info("branch %s: summarised positions below %s", branch.pk, end)
    assert summary is not None
    return summary


# --- what the page and the API show --------------------------------------------------------


@dataclass
class Usage:
    limits: Limits
    tokens: int  # the next request by our count (calibrated), without the new message
    view_start: int
    summary: Summary | None
    message_count: int

    @property
    def percent(self) -> int:
        return min(999, round(100 * self.tokens / max(1, self.limits.usable)))


def context_usage(branch: InternalSession) -> Usage:
    """How much of the window the branch's next request would use, and where the model's view
    begins. Two queries, whatever the history's length."""
    session = branch.session
    try:
        model = model_id_for(session.settings)
    except InvalidInput:
        model = settings.AGENT_MODEL
    try:
        limits = limits_for(session, model)
    except InvalidInput:
        limits = Limits(settings.AGENT_CONTEXT_TOKENS, settings.AGENT_MAX_OUTPUT_TOKENS)
    summary = lineage_summary(branch)
    start = summary.end_position if summary is not None else 0
    chars, count = history_size(branch, start=start)
    ratio = ratio_for(model)
    used = tokens(SYSTEM_CHARS + chars, messages=count + 1, ratio=ratio)
    return Usage(
        limits, used + _summary_tokens(summary, ratio), start, summary, branch.message_count
    )
