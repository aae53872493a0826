"""Fitting a turn's request within the window: the history after the newest summary that
fits, the older part summarised (agents.context.writer) when it does not; a tool exchange (an
assistant's tool calls and their results) is never split, and large results of old tool calls
are shortened in the request before anything is summarised. Also the summarising ahead of need.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.errors import InvalidInput
from core.model_choice import model_id_for
from sessions_app.models import Branch, Message, Session, Summary
from sessions_app.selectors import branch_history, lineage_summary

from .counting import SYSTEM_CHARS, Limits, limits_for, message_chars, ratio_for, tokens
from .summariser import summarising
from .usage import Usage, context_usage
from .writer import ContextTooSmall, _summarise, _summary_budget, _summary_tokens, bounded

KEEP_SHARE = 0.5  # after summarising, the newest messages fill at most this share of what is left
TOOL_RESULT_KEEP_CHARS = 1_200  # old tool results longer than this are shortened in requests
RECENT_UNITS = 2  # the newest exchanges keep their tool results whole
AHEAD_SHARE = 0.75  # the history after the summary is summarised ahead past this share of room


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
    # The history's characters as stored, before old tool results were shortened for the
    # request (as history_size counts them): what the after-work starts its count from.
    stored_chars: int = 0

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


def needs_summary_ahead(branch: Branch, usage: Usage | None = None) -> bool:
    """Whether the part of the branch's history after its newest summary has passed
    AHEAD_SHARE of what a request leaves it (by a two-query count, as context_usage, or by
    `usage` when the caller knows it: agents.summaries after a turn)."""
    usage = usage or context_usage(branch)
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
            stored_chars = sum(message_chars(m) for m in history)
            units = _units(history)
            summary_tokens = _summary_tokens(summary, self.ratio)
            room = self.limits.usable - self.fixed - summary_tokens
            sizes = _sizes(units, self.ratio)
            if sum(sizes) > room:  # first, shorten the large results of old tool calls
                _shorten_old_tool_results(units)
                sizes = _sizes(units, self.ratio)
            if sum(sizes) <= (room * AHEAD_SHARE if self.ahead else room):
                used = self.fixed + summary_tokens + sum(sizes)
                return self._fit(history, summary, start, used, stored_chars)
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
                return self._fit(history, summary, start, used, stored_chars)
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

    def _fit(
        self, history: list[Message], summary: Summary | None, start: int, used: int, chars: int
    ) -> Fit:
        return Fit(history, summary, start, used, self.limits, self.made, self.ratio, chars)


def _sizes(units: list[list[Message]], ratio: float) -> list[int]:
    return [tokens(sum(message_chars(m) for m in u), messages=len(u), ratio=ratio) for u in units]
