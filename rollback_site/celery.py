"""The Celery app, `rollback_site.celery:app`. Without REDIS_URL tasks run eagerly in process."""

from __future__ import annotations

import os

from celery import Celery

from ops.heartbeat import WorkerHeartbeat

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rollback_site.settings")

app = Celery("rollback")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Each worker says it is alive, for /healthz (ops.health).
app.steps["worker"].add(WorkerHeartbeat)
