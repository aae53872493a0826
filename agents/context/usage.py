"""What the page and the API show of a branch's context: how much of the window its next request
would use, and where the model's view begins."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from core.errors import InvalidInput
from core.model_choice import model_id_for
from sessions_app.models import Branch, Summary
from sessions_app.selectors import history_size, lineage_summary

from ..instructions import owner_instructions_for
from .counting import SYSTEM_CHARS, Limits, limits_for, ratio_for, tokens
from .summariser import is_summarising
from .writer import _summary_budget, _summary_tokens, bounded


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
    summary = lineage_summary(branch)
    start = summary.end_position if summary is not None else 0
    chars, count = history_size(branch, start=start)
    return usage_of(branch, summary=summary, chars=chars, count=count)


def usage_of(
    branch: Branch, *, summary: Summary | None, chars: int, count: int, watched: bool = True
) -> Usage:
    """`context_usage` from what is already known: the branch's newest summary (or none), and
    the characters and messages of its history after it (as `history_size` counts them). No
    query (the session and its owner loaded): a turn's after-work judges by it whether to
    summarise ahead, from what its fitting read and its store wrote (agents.summaries).
    `watched=False` does not ask the cache whether a summariser is at work (`summarizing`
    stays False), for a caller that does not show it."""
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
    summary = bounded(summary, budget, ratio)
    start = summary.end_position if summary is not None else 0
    used = tokens(system_chars + chars, messages=count + 1, ratio=ratio)
    return Usage(
        limits,
        used + _summary_tokens(summary, ratio),
        start,
        summary,
        branch.message_count,
        ratio,
        is_summarising(branch.pk) if watched else False,
    )
