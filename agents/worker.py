"""A worker's door into the turn (agents.tasks, on Celery or on the embedded pool): the turn
is claimed, its agent built from the session, and run through the pipeline (agents.turn)."""

from __future__ import annotations

from agno.models.base import Model

from core.validation import JSONObject
from sessions_app.models import Turn
from sessions_app.turns import turn_model_of

from .model import build_model, default_model_for
from .rollback_agent import RollbackAgent, auto_checkpoint_enabled
from .turn.claim import ClaimFailed
from .turn.pipeline import run_queued

__all__ = ["ClaimFailed", "agent_for_turn", "run_turn"]


def agent_for_turn(turn: Turn, model: Model | None = None) -> RollbackAgent:
    """The agent a worker runs a turn with: on the turn's branch (left as it is), carrying
    out the rollbacks the model asks for, with the session's model (or the one asked for this
    turn only: a reply regenerated with another model, checked again here as allowed)."""
    session = turn.session
    return RollbackAgent(
        external_session_id=session.pk,
        user=session.owner,
        model=model
        or build_model(settings_for_turn(turn), default_id=default_model_for(session.owner)),
        auto_checkpoint=auto_checkpoint_enabled(session),
        skip_session_creation=True,
        internal_session_id=turn.branch_id,
        activate_branch=False,
        carry_out_rollbacks=True,
        for_turn=turn,  # the session, its owner and the branch as the claim read them
    )


def settings_for_turn(turn: Turn) -> JSONObject:
    """The session's settings, with the model asked for this turn only in place of its own."""
    chosen = turn_model_of(turn)
    own = turn.session.settings
    return {**own, "model": chosen} if chosen else own


def run_turn(turn_id: int, *, model: Model | None = None) -> Turn | None:
    """Claim a queued turn and run it. None when it was not queued (a redelivered task, a turn
    another worker took over, a deleted session): the reason is logged and nothing is stored.
    ClaimFailed when the database failed during the claim: nothing changed, try again.
    Every line logged meanwhile (agno's, openai's and httpx's included) carries the turn's ids
    and those of the request that queued it; the last one reports the outcome (report_turn)."""
    return run_queued(turn_id, lambda turn: agent_for_turn(turn, model))
