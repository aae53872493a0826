"""Celery tasks: thin adapters that take ids and call the turn pipeline (through
agents.worker) or a service.

Every process imports this module at the start (agents.apps registers the tasks by name), so it
imports none of the turn's code: agents.worker (agno, openai) is imported by the task that runs a
turn. The processes that run turns import it at their start instead (`preload_turn_code`), so no
turn pays for the import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from celery import shared_task

from .services import turns_recover
from .summaries import branch_summarise
from .turn.claim import ClaimFailed

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
    from .worker import run_turn

    turn = run_turn(turn_id)
    return turn.status if turn is not None else "not queued"


@task(name="agents.recover_turns", ignore_result=True)
def recover_turns_task() -> dict[str, int]:
    """The periodic job (beat, every TURN_RECOVERY_SECONDS): turns whose worker died are run
    again by another worker, or failed once their attempts are used up."""
    done = turns_recover()
    return {"requeued": len(done.requeued), "failed": len(done.failed)}


@task(name="agents.refresh_mcp_catalogues", ignore_result=True)
def refresh_mcp_catalogues_task(names: list[str] | None = None) -> dict[str, str]:
    """List the MCP servers' tools again (all enabled, or those named: the admin's check)."""
    from .mcp.services import mcp_catalogue_refresh, mcp_servers_ensure

    mcp_servers_ensure()
    return mcp_catalogue_refresh(names=names)


@task(name="agents.check_mcp_server", ignore_result=True)
def check_mcp_server_task(server_id: int) -> dict[str, str]:
    """The admin's "Test connection": list one server's tools now (on a worker, or the embedded
    pool: never in a web request, which must not start a stdio server); the row keeps the result."""
    from .mcp.services import mcp_catalogue_refresh
    from .models import McpServer

    name = McpServer.objects.filter(pk=server_id).values_list("name", flat=True).first()
    return mcp_catalogue_refresh(names=[name]) if name is not None else {}


@task(name="agents.summarise_branch", ignore_result=True)
def summarise_branch_task(branch_id: int) -> int:
    """Summarise a branch's history ahead of need (agents.summaries); idempotent, and harmless
    when another summariser holds the branch."""
    return branch_summarise(branch_id=branch_id)


def preload_turn_code() -> None:
    """Import the code that runs turns (agents.worker, and with it agno and openai), for a
    process that runs turns, at its start: the served process (rollback_site.serve,
    rollback_site.asgi) and a Celery worker before it forks its pool (rollback_site.celery).
    Management commands never call it, and never load that code."""
    from . import worker  # noqa: F401
