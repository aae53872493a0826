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

The parts: `counting` (tokens, calibration, the window's limits), `fitting` (a turn's request,
summarising ahead), `writer` (writing and bounding the summaries), `summariser` (one summariser
per branch), `usage` (what the page and the API show), `ledger` (what a restore left behind).
Every name is importable from agents.context itself.
"""

from __future__ import annotations

from ..markers import SUMMARY_MARKER
from .counting import (
    CHARS_PER_TOKEN,
    MESSAGE_TOKENS,
    RATIO_MAX,
    RATIO_MIN,
    RATIO_SECONDS,
    REFUSAL_HALF_LIFE,
    REFUSAL_MAX,
    REFUSAL_STEP,
    RETRY_SHARE,
    SAFETY,
    SYSTEM_CHARS,
    WINDOW_SECONDS,
    Counted,
    Limits,
    calibrate,
    limits_for,
    message_chars,
    overflowed,
    ratio_for,
    refusal_factor,
    tokens,
)
from .fitting import (
    AHEAD_SHARE,
    KEEP_SHARE,
    RECENT_UNITS,
    TOOL_RESULT_KEEP_CHARS,
    Fit,
    fit_turn,
    needs_summary_ahead,
    summarise_ahead,
)
from .ledger import LEDGER_NOTE_ARGS_CHARS, LEDGER_NOTE_EFFECTS, left_behind_lines, left_behind_note
from .summariser import (
    SUMMARISING_POLL,
    SUMMARISING_SECONDS,
    Claim,
    is_summarising,
    summarising,
    summary_queued,
)
from .usage import Usage, context_usage, usage_of
from .writer import (
    CUT_NOTE,
    PIECE_RETRIES,
    PIECE_SHARE,
    PIECE_SHRINK,
    SUMMARY_INSTRUCTIONS,
    SUMMARY_MAX_TOKENS,
    SUMMARY_PROMPT_CHARS,
    ContextTooSmall,
    SummaryFailed,
    bounded,
    cut_summary,
    replace_content,
)

__all__ = [
    "AHEAD_SHARE",
    "CHARS_PER_TOKEN",
    "CUT_NOTE",
    "KEEP_SHARE",
    "LEDGER_NOTE_ARGS_CHARS",
    "LEDGER_NOTE_EFFECTS",
    "MESSAGE_TOKENS",
    "PIECE_RETRIES",
    "PIECE_SHARE",
    "PIECE_SHRINK",
    "RATIO_MAX",
    "RATIO_MIN",
    "RATIO_SECONDS",
    "RECENT_UNITS",
    "REFUSAL_HALF_LIFE",
    "REFUSAL_MAX",
    "REFUSAL_STEP",
    "RETRY_SHARE",
    "SAFETY",
    "SUMMARISING_POLL",
    "SUMMARISING_SECONDS",
    "SUMMARY_INSTRUCTIONS",
    "SUMMARY_MARKER",
    "SUMMARY_MAX_TOKENS",
    "SUMMARY_PROMPT_CHARS",
    "SYSTEM_CHARS",
    "TOOL_RESULT_KEEP_CHARS",
    "WINDOW_SECONDS",
    "Claim",
    "ContextTooSmall",
    "Counted",
    "Fit",
    "Limits",
    "SummaryFailed",
    "Usage",
    "bounded",
    "calibrate",
    "context_usage",
    "cut_summary",
    "fit_turn",
    "is_summarising",
    "left_behind_lines",
    "left_behind_note",
    "limits_for",
    "message_chars",
    "needs_summary_ahead",
    "overflowed",
    "ratio_for",
    "refusal_factor",
    "replace_content",
    "summarise_ahead",
    "summarising",
    "summary_queued",
    "tokens",
    "usage_of",
]
