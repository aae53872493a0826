"""A Celery worker's heartbeat for /healthz: a bootstep of the worker (rollback_site.celery adds it)
that records `ops.health.WORKER_KEY` in the cache every HEALTH_HEARTBEAT_SECONDS while the worker
runs.

It beats from a thread of its own rather than on the worker's Timer: under the Redis transport the
Timer is the event loop's (kombu's hub), and the solo pool runs each task inline on that loop, so
no timer fires while a turn runs, which can take minutes. A busy worker would look dead. The
thread stops with the worker (a warm or cold shutdown) and dies with it (SIGKILL); in a prefork
worker it runs in the parent only, which is what keeps the pool's children.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import bootsteps
from django.conf import settings

from ops.health import WORKER_KEY, heartbeat_record

log = logging.getLogger(__name__)


class Heart:
    """Calls `heartbeat_record(WORKER_KEY)` every `interval` seconds on a daemon thread, from
    `start()` until `stop()`. A failed write is logged (once until one succeeds) and retried at
    the next beat: the worker goes on either way."""

    def __init__(self, hostname: str, interval: float) -> None:
        self.hostname = hostname
        self.interval = interval
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stopped.clear()
        self._thread = threading.Thread(target=self._run, name="health-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + settings.HEALTH_CHECK_TIMEOUT)
            self._thread = None

    def _run(self) -> None:
        failing = False
        while True:
            try:
                heartbeat_record(WORKER_KEY, hostname=self.hostname)
            except Exception:
                if not failing:
                    log.warning("health: the worker's heartbeat was not recorded", exc_info=True)
                failing = True
            else:
                if failing:
                    log.warning("health: the worker's heartbeat is recorded again")
                failing = False
            if self._stopped.wait(self.interval):
                return


class WorkerHeartbeat(bootsteps.StartStopStep):  # type: ignore[misc]  # celery is untyped
    """The bootstep: its `obj` (a `Heart`) is started and stopped with the worker."""

    label = "Health heartbeat"

    def create(self, w: Any) -> Heart:
        return Heart(w.hostname, settings.HEALTH_HEARTBEAT_SECONDS)
