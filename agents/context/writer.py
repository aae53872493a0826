"""Writing the summaries of a history's older part: in pieces that each fit the window, each
summary building on the last and stored (sessions_app.models.Summary) against the last message it
covers, so it serves every branch that shares that prefix and is never made twice. A summary is
cut to its budget whatever the server sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from core.errors import InvalidInput
from sessions_app.models import Branch, Message, Session, Summary
from sessions_app.services import summary_store

from ..markers import SUMMARY_MARKER
from .counting import CHARS_PER_TOKEN, SAFETY, Limits, overflowed, tokens

log = logging.getLogger("agents.context")  # the name it logged under as one module

SUMMARY_MAX_TOKENS = 1_024
SUMMARY_PROMPT_CHARS = 800
# A summarising request holds at most this share of what our count allows, counted at least at
# one of our tokens per token; refused all the same, its piece is cut to PIECE_SHRINK of its size
# and asked again, at most PIECE_RETRIES times.
PIECE_SHARE, PIECE_SHRINK, PIECE_RETRIES = 0.85, 0.6, 3

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
    # The model's code (agno, openai) is imported by what asks it, not with this package:
    # django.setup() imports agents.context, and most processes never summarise.
    from ..model import (
        ChargeTo,
        ask_once,
        build_model,
        default_model_for,
        is_context_overflow,
        model_label,
    )

    summariser = build_model(
        session.settings, default_id=default_model_for(session.owner), max_tokens=reply_tokens
    )
    charge = ChargeTo(
        user_id=session.owner_id, session_id=session.pk, kind="summary", branch_id=branch.pk
    )
    summary = previous
    done, shrinks = 0, 0
    while done < len(units):
        if stop():
            raise SummaryFailed("the turn was stopped")
        taken = _next_piece(units[done:], piece_chars)
        piece = [m for unit in taken for m in unit]
        prompt = _summary_prompt(piece, piece_chars, summary)
        answered, content = ask_once(summariser, SUMMARY_INSTRUCTIONS, prompt, charge=charge)
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
