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

from django.db import transaction

from sessions_app.models import Branch, Session, Turn
from sessions_app.selectors import current_branch

from .context import needs_summary_ahead, summarise_ahead, summary_queued
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


def summaries_after_turn(*, turn: Turn) -> None:
    """After a finished turn: summarise its branch ahead once the part after its newest summary
    has grown past the threshold. Never raises: the next turn summarises what it needs."""
    if turn.status != Turn.Status.DONE or turn.branch_id is None:
        return
    try:
        found = _stored_branch(turn) or (
            Branch.objects.select_related("session").filter(pk=turn.branch_id).first()
        )
        if found is not None and needs_summary_ahead(found):
            summaries_schedule(branch_id=found.pk)
    except Exception:
        log.warning("turn %s: could not look whether to summarise ahead", turn.pk, exc_info=True)


def _stored_branch(turn: Turn) -> Branch | None:
    """The turn's branch as its store left it (agents.turn.store: read under the session's lock,
    its length counting the answer), with the session and owner its claim read; None when the
    turn does not hold them (then they are read)."""
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
