"""The Celery app, `rollback_site.celery:app`. Without REDIS_URL tasks run eagerly in process.

A worker or beat would otherwise set up logging its own way (replacing the root logger's
handlers with its own format: `worker_hijack_root_logger`). Connecting `setup_logging` tells
Celery to leave logging alone: the receiver applies settings.LOGGING, as Django does in every
other process, so worker and beat lines follow LOG_FORMAT and LOG_LEVEL (Celery's `--loglevel`
and `--logfile` are not used) and carry the ids of the turn they run.

A worker imports the code that runs turns (agno, openai) when it starts, before it forks its pool
(`worker_init`): each pool process has it from the start, and no turn pays for the import.
django.setup() does not import it, so beat and the management commands never load it. It sizes
its PostgreSQL pool by its concurrency then, unless DATABASE_POOL_SIZE is set
(core.postgres.follow_worker).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import setup_logging, worker_init

log = logging.getLogger("rollback_site.celery")

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rollback_site.settings")

app = Celery("rollback")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect  # type: ignore[untyped-decorator]  # celery is untyped
def use_django_logging(**kwargs: Any) -> None:
    from django.conf import settings
    from django.utils.log import configure_logging

    configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)


@worker_init.connect  # type: ignore[untyped-decorator]  # celery is untyped
def preload_in_worker(sender: Any = None, **kwargs: Any) -> None:
    # Sent once the worker has set Django up (Celery's Django fixup, connected first), with the
    # worker (its pool and concurrency) as the sender, before it forks or runs a task.
    from agents.tasks import preload_turn_code
    from core.postgres.base import follow_worker

    size = follow_worker(getattr(sender, "pool_cls", ""), getattr(sender, "concurrency", None))
    if size is not None:
        log.info("database pool: at most %s connections per process", size)
    preload_turn_code()


# Each worker says it is alive, for /healthz (ops.health). Named by its path, which the worker
# imports as it starts: every other process (each that imports the Celery app) need not import
# the health checks (ops.health, and with them channels_redis) at django.setup().
app.steps["worker"].add("ops.heartbeat:WorkerHeartbeat")
