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
per model by the input tokens the server reports for the requests it answered. What is learned
never locks a model out: the calibration is bounded (never more than a token per character) and
forgotten after a while; a refusal as too long makes the count larger for a while only (at most
REFUSAL_MAX times, decaying back by half every REFUSAL_HALF_LIFE seconds), and the refused
request is fitted again within a smaller share of the window for itself alone. A request whose
characters fit the window is always sent.

A long history is summarised ahead of need, in the background (agents.summaries), once the part
after its newest summary passes AHEAD_SHARE of what a request may hold; only one summariser
works on a branch at a time (`summarising`), and a turn that needs a summary waits for it.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache

from core.errors import InvalidInput
from core.model_choice import chosen_context_tokens
from sessions_app.models import Branch, Message, Session, Summary
from sessions_app.selectors import branch_history, history_size, lineage_summary
from sessions_app.services import summary_store

from .demo_model import SUMMARY_MARKER
from .instructions import owner_instructions_for
from .model import ask_once, build_model, is_context_overflow, model_id_for, model_label

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 3.5  # English prose is about 4, code about 3: err towards counting more
MESSAGE_TOKENS = 4  # each message's role and framing
# The instructions and the tool schemas agno sends with every request (measured: about 7,200
# characters for the built-in tools, the memory, file and plan tools included), with room to
# spare. The L0 lines of the user's memories and the ledger's note come on top (fit_turn's
# `extra_chars`).
SYSTEM_CHARS = 8_400
SAFETY = 0.95  # the share of the window a request may fill by our count
KEEP_SHARE = 0.5  # after summarising, the newest messages fill at most this share of what is left
SUMMARY_MAX_TOKENS = 1_024
SUMMARY_PROMPT_CHARS = 800
TOOL_RESULT_KEEP_CHARS = 1_200  # old tool results longer than this are shortened in requests
RECENT_UNITS = 2  # the newest exchanges keep their tool results whole
# A server's token is never less than a character: the calibrated ratio stays below the count
# of one token per character, and is forgotten after RATIO_SECONDS without a turn to renew it.
RATIO_MIN, RATIO_MAX = 0.5, CHARS_PER_TOKEN
RATIO_SECONDS = 7 * 24 * 3600
# Each refusal as too long counts REFUSAL_STEP times more, at most REFUSAL_MAX times, and the
# extra halves every REFUSAL_HALF_LIFE seconds; a turn the server answers ends it.
REFUSAL_STEP, REFUSAL_MAX, REFUSAL_HALF_LIFE = 1.5, 2.0, 600.0
WINDOW_SECONDS = 24 * 3600  # a window the server stated is used this long
RETRY_SHARE = 0.75  # a request refused as too long is fitted again within this share
# A summarising request holds at most this share of what our count allows, counted at least at
# one of our tokens per token; refused all the same, its piece is cut to PIECE_SHRINK of its size
# and asked again, at most PIECE_RETRIES times.
PIECE_SHARE, PIECE_SHRINK, PIECE_RETRIES = 0.85, 0.6, 3
AHEAD_SHARE = 0.75  # the history after the summary is summarised ahead past this share of room
SUMMARISING_SECONDS = 300  # a summariser's claim on a branch, renewed at each piece
SUMMARISING_POLL = 0.2  # how often a turn looks whether the branch's summariser has finished

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


# The note telling the model what a restore left behind (the branch's `left_behind`, kept by
# checkpoints.services): at most this many effects, the newest, each call's arguments cut short.
LEDGER_NOTE_EFFECTS = 10
LEDGER_NOTE_ARGS_CHARS = 160


def left_behind_note(branch: Branch) -> str | None:
    """What the restore that made (or rewound) `branch` could not undo, for the model's
    instructions: the external effects of tool calls it left behind, so the model does not do
    them again unasked. None when the branch's restore left nothing behind."""
    entries = (branch.metadata or {}).get("left_behind")
    if not isinstance(entries, list):
        return None
    lines = [_ledger_line(e) for e in entries[-LEDGER_NOTE_EFFECTS:] if isinstance(e, dict)]
    if not lines:
        return None
    more = len(entries) - LEDGER_NOTE_EFFECTS
    if more > 0:
        lines.insert(0, f"- (and {more} earlier ones)")
    return (
        "<left_behind>\n"
        "This conversation was restored to an earlier point. These tool calls were made before "
        "the restore and acted outside this conversation: the restore did not undo them, they "
        "still happened. Do not do them again unless the user asks you to.\n"
        + "\n".join(lines)
        + "\n</left_behind>"
    )


def left_behind_lines(branch: Branch) -> list[str]:
    """What the restore that made (or rewound) `branch` could not undo, for its user: a line per
    external effect left behind (`manage.py chat` prints them, the Telegram bot sends them)."""
    meta = branch.metadata
    effects = meta.get("left_behind") if isinstance(meta, dict) else None
    return [
        f"[cannot undo] {effect.get('tool_name')} ({effect.get('created_at')})"
        for effect in (effects if isinstance(effects, list) else [])
        if isinstance(effect, dict)
    ]


def _ledger_line(entry: dict[str, Any]) -> str:
    tool = str(entry.get("tool_name") or "a tool")[:100]
    args = entry.get("args")
    shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)
    if len(shown) > LEDGER_NOTE_ARGS_CHARS:
        shown = shown[:LEDGER_NOTE_ARGS_CHARS] + "…"
    when = str(entry.get("created_at") or "")[:19].replace("T", " ")
    return f"- {tool} {shown}" + (f" at {when} UTC" if when else "")


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


# --- counting ------------------------------------------------------------------------------


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
    session: Session,
    branch: Branch,
    end: int,
    message: str,
    model: str,
    stop: Callable[[], bool] = lambda: False,
    extra_chars: int = 0,
    retry: bool = False,
) -> Fit:
    """The history to send for a turn whose user message sits at `end`, summarising what does
    not fit; `extra_chars` more of instructions (the user's memories) are sent too. With
    `retry` (the server refused this request as too long), it is fitted within a smaller share
    of the window. ContextTooSmall when even one token per character cannot fit the message
    into the window; SummaryFailed when a needed summary could not be written."""
    limits = limits_for(session, model, retry=retry)
    ratio = ratio_for(model)
    fixed_chars = SYSTEM_CHARS + extra_chars + len(message)
    fixed = tokens(fixed_chars, messages=2, ratio=ratio)
    if fixed > limits.usable and ratio > 1.0:
        # What we learned of the server's count may not lock the model out: count as at first.
        ratio = 1.0
        fixed = tokens(fixed_chars, messages=2)
    if fixed > limits.usable:
        if fixed_chars > limits.context:  # no server counts more than a token per character
            raise ContextTooSmall(
                f"This message needs about {fixed:,} tokens with the instructions (your custom "
                "instructions included), and the "
                f"reply keeps {limits.reserve:,} (AGENT_MAX_OUTPUT_TOKENS): more than the "
                f"model's window of {limits.context:,} tokens (AGENT_CONTEXT_TOKENS or the "
                "session's settings.context_tokens). Shorten the message, or raise the window."
            )
        # Its characters fit the window: it is sent, alone, and the server decides.
        return Fit([], None, end, fixed, limits, [], ratio)
    plan = _Plan(session, branch, end, model, limits, fixed, ratio, stop)
    fit = plan.fit(summarise=False)
    if fit is not None:
        return fit
    with summarising(branch.pk, wait=True, stop=stop) as claimed:
        if claimed:  # another summariser may have finished meanwhile: look again
            plan.stop = claimed.renewing(stop)
        fit = plan.fit(summarise=True)
    assert fit is not None  # noqa: S101 - narrowing for mypy: it fits once it may summarise
    return fit


def summarise_ahead(
    *, session: Session, branch: Branch, stop: Callable[[], bool] = lambda: False
) -> list[Summary] | None:
    """Summarise the branch's history ahead of need: once the part after its newest summary
    passes AHEAD_SHARE of what a request leaves it, the older part of it is summarised and the
    newest kept whole, as a turn would (a short message, no memories). The summaries made
    (none when it was not needed); None when another summariser holds the branch."""
    try:
        model = model_id_for(session.settings)
    except InvalidInput:
        return []
    limits = limits_for(session, model)
    ratio = ratio_for(model)
    fixed = tokens(SYSTEM_CHARS, messages=2, ratio=ratio)
    if fixed > limits.usable:
        return []
    end = branch.message_count
    plan = _Plan(session, branch, end, model, limits, fixed, ratio, stop, ahead=True)
    if plan.fit(summarise=False) is not None:
        return []
    with summarising(branch.pk, wait=False, stop=stop) as claimed:
        if not claimed:
            return None
        plan.stop = claimed.renewing(stop)
        plan.fit(summarise=True)
    return plan.made


def needs_summary_ahead(branch: Branch) -> bool:
    """Whether the part of the branch's history after its newest summary has passed
    AHEAD_SHARE of what a request leaves it (by a two-query count, as context_usage)."""
    usage = context_usage(branch)
    history = usage.tokens - tokens(SYSTEM_CHARS, messages=1, ratio=usage.ratio)
    history -= _summary_tokens(usage.summary, usage.ratio)
    fixed = tokens(SYSTEM_CHARS, messages=2, ratio=usage.ratio)
    room = usage.limits.usable - fixed - _summary_tokens(usage.summary, usage.ratio)
    return history > AHEAD_SHARE * room


@dataclass
class _Plan:
    """Fitting one request's history: what stays whole, what is summarised."""

    session: Session
    branch: Branch
    end: int
    model: str
    limits: Limits
    fixed: int  # the request's tokens besides the history and the summary
    ratio: float
    stop: Callable[[], bool]
    ahead: bool = False  # summarising ahead of need: past AHEAD_SHARE of the room
    made: list[Summary] = field(default_factory=list)

    def fit(self, *, summarise: bool) -> Fit | None:
        """The fitted request; None when it needs a summary and `summarise` is off."""
        budget = _summary_budget(self.limits, self.fixed)
        summary = bounded(lineage_summary(self.branch, end=self.end), budget, self.ratio)
        while True:
            start = summary.end_position if summary is not None else 0
            history = branch_history(self.branch, start=start, end=self.end)
            units = _units(history)
            summary_tokens = _summary_tokens(summary, self.ratio)
            room = self.limits.usable - self.fixed - summary_tokens
            sizes = _sizes(units, self.ratio)
            if sum(sizes) > room:  # first, shorten the large results of old tool calls
                _shorten_old_tool_results(units)
                sizes = _sizes(units, self.ratio)
            if sum(sizes) <= (room * AHEAD_SHARE if self.ahead else room):
                used = self.fixed + summary_tokens + sum(sizes)
                return Fit(history, summary, start, used, self.limits, self.made, self.ratio)
            # Keep the newest units whole, within a share of what a summary leaves; summarise
            # the rest.
            keep_room = max(0, int((self.limits.usable - self.fixed - budget) * KEEP_SHARE))
            kept, total = 0, 0
            for size in reversed(sizes):
                if total + size > keep_room:
                    break
                total += size
                kept += 1
            older = units[: len(units) - kept]
            if not older:  # only when the summary is longer than a new one may be: send as is
                used = self.fixed + summary_tokens + total
                return Fit(history, summary, start, used, self.limits, self.made, self.ratio)
            if not summarise:
                return None
            summary = _summarise(
                session=self.session,
                branch=self.branch,
                units=older,
                previous=summary,
                limits=self.limits,
                reply_tokens=budget,
                model=self.model,
                ratio=self.ratio,
                stop=self.stop,
                made=self.made,
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


CUT_NOTE = " … [summary cut to its budget]"


def cut_summary(text: str, budget: int, ratio: float) -> str:
    """`text` within `budget` tokens by our count (at least one of ours per token): a server
    may ignore max_tokens (a gateway may drop it), and a summary is never trusted to obey it."""
    limit = int(budget * CHARS_PER_TOKEN / max(1.0, ratio))
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit - len(CUT_NOTE))]
    space = cut.rfind(" ")
    if space > len(cut) * 0.8:
        cut = cut[:space]
    return cut.rstrip() + CUT_NOTE


def bounded(summary: Summary | None, budget: int, ratio: float) -> Summary | None:
    """The summary within its budget (one stored longer, before summaries were cut, is cut in
    the request only)."""
    if summary is None:
        return None
    content = cut_summary(summary.content, budget, ratio)
    return summary if content == summary.content else replace_content(summary, content)


def replace_content(summary: Summary, content: str) -> Summary:
    copy = Summary(
        pk=summary.pk,
        last_message_id=summary.last_message_id,
        end_position=summary.end_position,
        content=content,
        model=summary.model,
        created_at=summary.created_at,
        metadata=summary.metadata,
    )
    copy._state.adding = False
    copy._state.db = summary._state.db
    return copy


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


def _piece_chars(limits: Limits, reply_tokens: int, ratio: float) -> int:
    """The characters of conversation one summarising request may hold: PIECE_SHARE of its
    window less the summary's reply, the instructions and the earlier summary (at most a
    reply's worth), counted at least at one of our tokens per token of the server's."""
    room = (int(limits.context * SAFETY) - 2 * reply_tokens) * PIECE_SHARE
    return int(room / max(1.0, ratio) * CHARS_PER_TOKEN - SUMMARY_PROMPT_CHARS)


def _next_piece(units: list[list[Message]], piece_chars: int) -> list[list[Message]]:
    """The first units, at least one, whose transcript holds within `piece_chars`."""
    taken: list[list[Message]] = []
    size = 0
    for unit in units:
        lines = sum(min(len(_transcript(m, piece_chars)), piece_chars) + 1 for m in unit)
        if taken and size + lines > piece_chars:
            break
        taken.append(unit)
        size += lines
    return taken


def _summary_prompt(piece: list[Message], piece_chars: int, summary: Summary | None) -> str:
    per_message = max(200, piece_chars // max(1, len(piece)))
    text = "\n".join(_transcript(m, per_message) for m in piece)[:piece_chars]
    earlier = f"<summary>\n{summary.content}\n</summary>\n\n" if summary is not None else ""
    return (
        f"{earlier}The conversation continues:\n{text}\n\n"
        "Write the updated summary of the whole conversation so far."
    )


def _summarise(
    *,
    session: Session,
    branch: Branch,
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
    each summary cut to `reply_tokens` whatever the server sent; each piece's summary is stored
    as soon as it is written. A piece the server refuses as too long is asked again smaller
    (PIECE_SHRINK, at most PIECE_RETRIES times in a row). Returns the last."""
    piece_chars = _piece_chars(limits, reply_tokens, ratio)
    if piece_chars < 400:
        raise ContextTooSmall(
            f"The model's window of {limits.context:,} tokens is too small to summarise the "
            "earlier messages of this conversation. Raise AGENT_CONTEXT_TOKENS (or the "
            "session's settings.context_tokens)."
        )
    summariser = build_model(session.settings, max_tokens=reply_tokens)
    summary = previous
    done, shrinks = 0, 0
    while done < len(units):
        if stop():
            raise SummaryFailed("the turn was stopped")
        taken = _next_piece(units[done:], piece_chars)
        piece = [m for unit in taken for m in unit]
        prompt = _summary_prompt(piece, piece_chars, summary)
        answered, content = ask_once(summariser, SUMMARY_INSTRUCTIONS, prompt)
        if not answered or not content.strip():
            reason = content.strip() or "it sent no summary"
            overflow = not answered and is_context_overflow(reason)
            # A smaller window the server stated: the whole request is fitted again to it.
            if overflow and not overflowed(model, reason, window=limits.context):
                smaller = int(piece_chars * PIECE_SHRINK)
                if shrinks < PIECE_RETRIES and smaller >= 400:
                    log.warning(
                        "branch %s: a summary of %s characters was refused as too long; "
                        "asking again with %s",
                        branch.pk,
                        piece_chars,
                        smaller,
                    )
                    piece_chars, shrinks = smaller, shrinks + 1
                    continue
            raise SummaryFailed(reason[:500], overflow=overflow)
        shrinks = 0
        done += len(taken)
        sent = content.strip()
        content = cut_summary(sent, reply_tokens, ratio)
        end = piece[-1].position + 1
        summary = summary_store(
            branch=branch,
            end=end,
            content=content,
            model=model_label(summariser),
            metadata={
                "tokens": tokens(len(content), ratio=ratio),
                "source_messages": len(piece),
                "previous": summary.pk if summary is not None else None,
                **({"cut_from_chars": len(sent)} if content != sent else {}),
            },
        )
        made.append(summary)
        log.info("branch %s: summarised positions below %s", branch.pk, end)
    assert summary is not None  # noqa: S101 - narrowing for mypy: callers give it units
    return summary


# --- one summariser per branch ------------------------------------------------------------


def _summarising_key(branch_id: int) -> str:
    return f"rollback:context:summarising:{branch_id}"


def _queued_key(branch_id: int) -> str:
    return f"rollback:context:summary-queued:{branch_id}"


@dataclass
class Claim:
    """A summariser's hold on a branch (in the cache: Redis with REDIS_URL, so across
    processes), for SUMMARISING_SECONDS, renewed at each piece it summarises."""

    key: str
    token: str

    def renewing(self, stop: Callable[[], bool]) -> Callable[[], bool]:
        def check() -> bool:
            cache.touch(self.key, SUMMARISING_SECONDS)
            return stop()

        return check


@contextmanager
def summarising(
    branch_id: int, *, wait: bool, stop: Callable[[], bool] = lambda: False
) -> Iterator[Claim | None]:
    """Hold the branch's summarising while the block runs: None when another summariser
    holds it. With `wait`, wait for it first (a turn), while `stop` allows and at most
    SUMMARISING_SECONDS: then the block runs without the hold (a summary of the same prefix
    is stored once, sessions_app.services.summary_store)."""
    key = _summarising_key(branch_id)
    token = uuid.uuid4().hex
    claimed = bool(cache.add(key, token, SUMMARISING_SECONDS))
    deadline = time.monotonic() + SUMMARISING_SECONDS
    while not claimed and wait and not stop() and time.monotonic() < deadline:
        time.sleep(SUMMARISING_POLL)
        claimed = bool(cache.add(key, token, SUMMARISING_SECONDS))
    try:
        yield Claim(key, token) if claimed else None
    finally:
        if claimed and cache.get(key) == token:
            cache.delete(key)


def summary_queued(branch_id: int, queued: bool) -> None:
    """Note (or clear) that a summariser for the branch is on its way (agents.summaries)."""
    if queued:
        cache.set(_queued_key(branch_id), 1, timeout=SUMMARISING_SECONDS)
    else:
        cache.delete(_queued_key(branch_id))


def is_summarising(branch_id: int) -> bool:
    """Whether the branch's history is being summarised, or is about to be."""
    found = cache.get_many([_summarising_key(branch_id), _queued_key(branch_id)])
    return bool(found)


# --- what the page and the API show --------------------------------------------------------


@dataclass
class Usage:
    limits: Limits
    tokens: int  # the next request by our count (calibrated), without the new message
    view_start: int
    summary: Summary | None  # as the request carries it (cut to its budget)
    message_count: int
    ratio: float = 1.0
    summarizing: bool = False  # the branch's older messages are being summarised

    @property
    def percent(self) -> int:
        return min(999, round(100 * self.tokens / max(1, self.limits.usable)))


def context_usage(branch: Branch) -> Usage:
    """How much of the window the branch's next request would use (the summary included),
    where the model's view begins, and whether a summariser is at work on the branch. Two
    queries (three when the session's owner is not loaded), whatever the history's length."""
    session = branch.session
    try:
        model = model_id_for(session.settings)
    except InvalidInput:
        model = settings.AGENT_MODEL
    try:
        limits = limits_for(session, model)
    except InvalidInput:
        limits = Limits(settings.AGENT_CONTEXT_TOKENS, settings.AGENT_MAX_OUTPUT_TOKENS)
    ratio = ratio_for(model)
    # The owner's custom instructions ride in every request (agents.instructions).
    owner = owner_instructions_for(
        session_metadata=session.metadata, user_metadata=session.owner.metadata
    )
    system_chars = SYSTEM_CHARS + len(owner or "")
    budget = _summary_budget(limits, tokens(system_chars, messages=2, ratio=ratio))
    summary = bounded(lineage_summary(branch), budget, ratio)
    start = summary.end_position if summary is not None else 0
    chars, count = history_size(branch, start=start)
    used = tokens(system_chars + chars, messages=count + 1, ratio=ratio)
    return Usage(
        limits,
        used + _summary_tokens(summary, ratio),
        start,
        summary,
        branch.message_count,
        ratio,
        is_summarising(branch.pk),
    )
