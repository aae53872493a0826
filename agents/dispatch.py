"""Handing a turn to whoever runs it.

With REDIS_URL a Celery worker does (the task goes through the broker). With the embedded
defaults there is no broker: the turn runs on a thread pool inside the web process (TURN_THREADS
turns at once; more wait their turn in its queue), so the
request that started it returns at once and the reply streams over the in-memory channel layer.
Tests may set ROLLBACK_RUN_TURNS_INLINE to run it in the calling thread instead.

The task is sent by its name through Celery's registry, as Celery intends: this module does not
import the code that runs turns (agents.tasks and what it uses sit above it).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from celery import current_app
from django.conf import settings
from django.db import close_old_connections

from core.db import release_connection

log = logging.getLogger(__name__)
RUN_TURN_TASK = "agents.run_turn"
SUMMARISE_TASK = "agents.summarise_branch"
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(
            max_workers=settings.TURN_THREADS, thread_name_prefix="rollback-turn"
        )
    return _pool


def _run_here(object_id: int, name: str = RUN_TURN_TASK) -> None:
    close_old_connections()
    try:
        # Not propagated, so the task's own retries apply as in a worker (at once here: an eager
        # run has no countdown); what still fails is logged.
        result = current_app.tasks[name].apply(args=[object_id], throw=False)
        if result.failed():
            error = result.result
            raise error
    except Exception:
        if name == RUN_TURN_TASK:
            log.exception("turn %s failed in process", object_id, extra={"turn_id": object_id})
        else:
            log.exception("task %s(%s) failed in process", name, object_id)
    finally:
        release_connection()


def drain() -> None:
    """Wait for the turns running on this process's pool to end (the tests call it after each
    test, so no turn outlives the test that started it)."""
    global _pool
    pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True)


def embedded() -> bool:
    """No broker: tasks run in this process (the defaults without REDIS_URL)."""
    return bool(current_app.conf.task_always_eager)


def enqueue_turn(turn_id: int) -> None:
    """Run the turn (call this after the transaction that created it has committed)."""
    _enqueue(RUN_TURN_TASK, turn_id)


def enqueue_summaries(branch_id: int) -> None:
    """Summarise the branch's history ahead of need (after the transaction has committed), as
    a turn is run: on a worker, on this process's pool, or inline in the tests."""
    _enqueue(SUMMARISE_TASK, branch_id)


def enqueue(name: str, object_id: int) -> None:
    """Run the Celery task `name` on `object_id` the way turns are run (a worker with a broker,
    this process's pool without one, inline in the tests); call it after the commit. For the
    tasks of the packages above this one (integrations.telegram_update)."""
    _enqueue(name, object_id)


def _enqueue(name: str, object_id: int) -> None:
    task = current_app.tasks[name]
    if not embedded():
        task.delay(object_id)
    elif getattr(settings, "ROLLBACK_RUN_TURNS_INLINE", False):
        task.apply(args=[object_id])
    else:
        _executor().submit(_run_here, object_id, name)
