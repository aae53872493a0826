"""The beat scheduler: django-celery-beat's database scheduler (schedules edited in the admin)."""

from __future__ import annotations

from django_celery_beat.schedulers import DatabaseScheduler


class Scheduler(DatabaseScheduler):
    """`CELERY_BEAT_SCHEDULER`. The schedules live in the database (django-celery-beat)."""
