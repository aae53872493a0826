"""What a worker does with a turn id: claim the turn, build its agent, run it (agents.runner),
then name the session if it has no name yet (agents.titles)."""

from __future__ import annotations

import logging
import os
import socket

from agno.models.base import Model
from django.db import InterfaceError, OperationalError

from core import logs
from sessions_app.models import Turn
from sessions_app.turns import turn_claim

from .model import build_model
from .rollback_agent import RollbackAgent, auto_checkpoint_enabled
from .runner import execute_turn, fail_turn, report_turn
from .summaries import summaries_after_turn
from .titles import session_autotitle

log = logging.getLogger(__name__)


class ClaimFailed(Exception):
    """The database failed while the turn was being claimed (a restarted server, a failover, a
    dropped connection): the turn is still queued, untouched, and its task tries again
    (agents.tasks). The claim's transaction dropped the broken connection, so the next try opens
    a new one."""


def agent_for_turn(turn: Turn, model: Model | None = None) -> RollbackAgent:
    session = turn.session
    return RollbackAgent(
        external_session_id=session.pk,
        user=session.owner,
        model=model or build_model(session.settings),
        auto_checkpoint=auto_checkpoint_enabled(session),
        skip_session_creation=True,
        internal_session_id=turn.branch_id,
        activate_branch=False,
        carry_out_rollbacks=True,
    )


def run_turn(turn_id: int, *, model: Model | None = None) -> Turn | None:
    """Claim a queued turn and run it. None when it was not queued (a redelivered task, a turn
    another worker took over, a deleted session): the reason is logged and nothing is stored.
    ClaimFailed when the database failed during the claim: nothing changed, try again.
    Every line logged meanwhile (agno's, openai's and httpx's included) carries the turn's ids
    and those of the request that queued it; the last one reports the outcome (report_turn)."""
    with logs.bound(turn_id=turn_id):
        try:
            turn = turn_claim(turn_id=turn_id, worker=f"{socket.gethostname()}:{os.getpid()}")
        except (OperationalError, InterfaceError) as exc:
            log.warning("turn %s not claimed: the database failed (%s)", turn_id, exc)
            raise ClaimFailed(str(exc)) from exc
        if turn is None:
            state = Turn.objects.filter(pk=turn_id).values_list("status", flat=True).first()
            log.info("turn %s not run: %s", turn_id, f"it is {state}" if state else "it is gone")
            return None
        with logs.bound(**turn.log_ids()):
            try:
                _run_claimed(turn, model)
            finally:
                report_turn(turn)
        return turn


def _run_claimed(turn: Turn, model: Model | None) -> None:
    if turn.branch_id is None:
        fail_turn(turn, "The branch of this turn was deleted before it could run.")
        return
    try:
        agent = agent_for_turn(turn, model)
    except Exception as exc:  # a broken configuration must fail the turn, not leave it running
        log.exception("could not build the agent for turn %s", turn.pk)
        fail_turn(turn, f"The agent could not start: {exc}")
        return
    execute_turn(agent, turn)
    turn.refresh_from_db()
    session_autotitle(turn)  # after the turn has finished: the reply never waits for a title
    summaries_after_turn(turn=turn)  # the branch grew: summarise ahead of the turn needing it
