"""Handing a turn to whoever runs it.

With REDIS_URL a Celery worker does (the task goes through the broker). With the embedded
defaults there is no broker: the turn runs on a small thread pool inside the web process, so the
request that started it returns at once and the reply streams over the in-memory channel layer.
Tests may set ROLLBACK_RUN_TURNS_INLINE to run it in the calling thread instead.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections, connection

log = logging.getLogger(__name__)
_pool: ThreadPoolExecutor | None = None
_recovery: threading.Thread | None = None
_recovery_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rollback-turn")
    return _pool


def _run_here(turn_id: int) -> None:
    from .tasks import run_turn_task

    close_old_connections()
    try:
        run_turn_task.apply(args=[turn_id])
    except Exception:
        log.exception("turn %s failed in process", turn_id)
    finally:
        connection.close()


def _embedded() -> bool:
    from rollback_site.celery import app

    return bool(app.conf.task_always_eager)


def _recover_forever() -> None:
    from .services import turns_recover

    while True:
        time.sleep(settings.TURN_RECOVERY_SECONDS)
        close_old_connections()
        try:
            turns_recover()
        except Exception:
            log.warning("the in-process turn recovery failed; trying again", exc_info=True)
        finally:
            connection.close()


def start_in_process_recovery() -> None:
    """The embedded mode has no broker, so no beat to run the recovery job: the web process runs
    it on a daemon thread of its own (started by the first socket or turn it serves), which
    also picks up turns a restarted process left running."""
    global _recovery
    if not _embedded() or not getattr(settings, "ROLLBACK_IN_PROCESS_RECOVERY", True):
        return
    with _recovery_lock:
        if _recovery is None:
            _recovery = threading.Thread(
                target=_recover_forever, name="rollback-turn-recovery", daemon=True
            )
            _recovery.start()


def enqueue_turn(turn_id: int) -> None:
    """Run the turn (call this after the transaction that created it has committed)."""
    from rollback_site.celery import app

    from .tasks import run_turn_task

    if not app.conf.task_always_eager:
        run_turn_task.delay(turn_id)
    elif getattr(settings, "ROLLBACK_RUN_TURNS_INLINE", False):
        run_turn_task.apply(args=[turn_id])
    else:
        start_in_process_recovery()
        _executor().submit(_run_here, turn_id)
