"""The beat scheduler: django-celery-beat's database scheduler (schedules edited in the admin)."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

from django_celery_beat.schedulers import DatabaseScheduler

from ops.health import BEAT_KEY, heartbeat_record

log = logging.getLogger(__name__)

# Beat wakes at least every 5 s (the scheduler's max interval) and more often when tasks are due:
# a heartbeat at most this often is enough.
HEARTBEAT_MIN_INTERVAL = 1.0


class Scheduler(DatabaseScheduler):  # type: ignore[misc]  # django-celery-beat is untyped
    """`CELERY_BEAT_SCHEDULER`. The schedules live in the database (django-celery-beat). Each
    wake (`tick`) also records beat's heartbeat for /healthz, after the due tasks were sent."""

    _last_heartbeat = 0.0
    _heartbeat_failing = False

    def tick(self, *args: Any, **kwargs: Any) -> float:
        interval: float = super().tick(*args, **kwargs)
        now = time.monotonic()
        if now - self._last_heartbeat >= HEARTBEAT_MIN_INTERVAL:
            self._last_heartbeat = now
            self._record_heartbeat()
        return interval

    def _record_heartbeat(self) -> None:
        """A failed write is logged (once until one succeeds); beat goes on either way."""
        try:
            heartbeat_record(BEAT_KEY, hostname=socket.gethostname())
        except Exception:
            if not self._heartbeat_failing:
                log.warning("health: beat's heartbeat was not recorded", exc_info=True)
            self._heartbeat_failing = True
        else:
            if self._heartbeat_failing:
                log.warning("health: beat's heartbeat is recorded again")
            self._heartbeat_failing = False
