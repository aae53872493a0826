"""Celery tasks: thin adapters that take ids and call the turn pipeline (through
agents.worker) or a service."""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from celery import shared_task

from .services import turns_recover
from .summaries import branch_summarise
from .worker import ClaimFailed, run_turn

P = ParamSpec("P")
R = TypeVar("R")


def task(**options: object) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """celery's `shared_task`, typed: celery ships no types, and the tasks are sent by their
    names (agents.dispatch), so what mypy needs of them is the function's own signature."""
    decorator: Callable[[Callable[P, R]], Callable[P, R]] = shared_task(**options)
    return decorator


# A claim the database failed (ClaimFailed) is tried again by Celery after 1, 2, 4, ... s (at
# most 30 s apart, with jitter), up to this many times: a few minutes of outage. Past that, or
# when the retry itself cannot be sent, the turn is still queued and the recovery job hands it to
# a worker again (TURN_REDISPATCH_SECONDS). A retry that finds the turn claimed does nothing.
CLAIM_RETRIES = 10


@task(
    name="agents.run_turn",
    acks_late=True,
    autoretry_for=(ClaimFailed,),
    max_retries=CLAIM_RETRIES,
    retry_backoff=1,
    retry_backoff_max=30,
    retry_jitter=True,
)
def run_turn_task(turn_id: int) -> str:
    turn = run_turn(turn_id)
    return turn.status if turn is not None else "not queued"


@task(name="agents.recover_turns", ignore_result=True)
def recover_turns_task() -> dict[str, int]:
    """The periodic job (beat, every TURN_RECOVERY_SECONDS): turns whose worker died are run
    again by another worker, or failed once their attempts are used up."""
    done = turns_recover()
    return {"requeued": len(done.requeued), "failed": len(done.failed)}


@task(name="agents.summarise_branch", ignore_result=True)
def summarise_branch_task(branch_id: int) -> int:
    """Summarise a branch's history ahead of need (agents.summaries); idempotent, and harmless
    when another summariser holds the branch."""
    return branch_summarise(branch_id=branch_id)
