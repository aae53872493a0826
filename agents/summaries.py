"""Summarising a branch's history ahead of need, in the background.

A long history is summarised before a turn needs it (agents.context.summarise_ahead): after an
import, and after a turn once the part of the branch after its newest summary has grown past
AHEAD_SHARE of what a request leaves it. The work is a Celery task, enqueued once the
transaction commits (agents.dispatch: in process without REDIS_URL, on a worker with it). It is
idempotent (a prefix already summarised is not summarised again) and one summariser works on a
branch at a time (agents.context.summarising); a turn that needs a summary meanwhile waits for
it. A summary that fails here breaks nothing: the next turn summarises what it needs itself.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import transaction

from sessions_app.models import Branch, Session, Turn
from sessions_app.selectors import current_branch

from .context import (
    Counted,
    Fit,
    Usage,
    context_usage,
    message_chars,
    needs_summary_ahead,
    summarise_ahead,
    summary_queued,
    usage_of,
)
from .dispatch import enqueue_summaries

log = logging.getLogger(__name__)


def summaries_schedule(*, branch_id: int) -> None:
    """Summarise the branch ahead of need once the current transaction commits; until the
    summariser has finished, the branch's context says it is summarising."""

    def enqueue() -> None:
        summary_queued(branch_id, True)
        try:
            enqueue_summaries(branch_id)
        except Exception:  # the broker is away: the next turn summarises what it needs
            summary_queued(branch_id, False)
            log.warning("branch %s: its summaries could not be queued", branch_id, exc_info=True)

    transaction.on_commit(enqueue)


def session_summaries_schedule(*, session: Session) -> None:
    """After an import: summarise the session's current branch ahead of its first turn."""
    summaries_schedule(branch_id=current_branch(session).pk)


def summaries_after_turn(*, turn: Turn, fit: Fit | None, added: Sequence[Counted]) -> None:
    """After a turn stored its answer: summarise its branch ahead once the part after its
    newest summary has grown past the threshold, judged by `usage_after_turn`. Never raises:
    the next turn summarises what it needs."""
    if turn.status != Turn.Status.DONE or fit is None:
        return
    try:
        branch = _stored_branch(turn)
        if branch is not None and needs_summary_ahead(branch, usage_after_turn(branch, fit, added)):
            summaries_schedule(branch_id=branch.pk)
    except Exception:
        log.warning("turn %s: could not look whether to summarise ahead", turn.pk, exc_info=True)


def usage_after_turn(branch: Branch, fit: Fit, added: Sequence[Counted]) -> Usage:
    """The branch's context usage after a turn, without a query, from what the turn already
    holds: the branch as its store left it (its length counting the answer, its session and
    owner as the claim read them), the summary and history its fitting read (`fit`), and
    `added`, what the branch gained after that history (the user's message and the answer).
    When those do not account for the whole branch (a message too long for its history was sent
    alone, or the branch grew meanwhile), it is counted as `context_usage` counts it."""
    start = fit.summary.end_position if fit.summary is not None else 0
    if start + len(fit.history) + len(added) != branch.message_count:
        return context_usage(branch)
    return usage_of(
        branch,
        summary=fit.summary,
        chars=fit.stored_chars + sum(message_chars(m) for m in added),
        count=len(fit.history) + len(added),
        watched=False,
    )


def _stored_branch(turn: Turn) -> Branch | None:
    """The turn's branch as its store left it (agents.turn.store: read under the session's lock,
    its length counting the answer), with the session and owner its claim read."""
    if not (Turn.branch.is_cached(turn) and Turn.session.is_cached(turn)):
        return None
    branch, session = turn.branch, turn.session
    if branch is None or branch.session_id != session.pk:
        return None
    if not Branch.session.is_cached(branch):
        branch.session = session
    return branch


def branch_summarise(*, branch_id: int) -> int:
    """Summarise the branch ahead of need (the task's work); how many summaries were made. A
    failure is logged and leaves the branch as it was."""
    try:
        branch = Branch.objects.select_related("session").filter(pk=branch_id).first()
        if branch is None:
            return 0
        made = summarise_ahead(session=branch.session, branch=branch)
        if made is None:
            log.info("branch %s: another summariser is at work on it", branch_id)
            return 0
        return len(made)
    except Exception:
        log.warning("branch %s: summarising ahead failed", branch_id, exc_info=True)
        return 0
    finally:
        summary_queued(branch_id, False)
