"""Celery tasks of checkpoints: thin adapters that take ids and call a service."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from .foreign.services import import_job_run

IMPORT_TASK = "checkpoints.run_import"


@shared_task(name=IMPORT_TASK, acks_late=True, ignore_result=True)  # type: ignore[untyped-decorator]
def run_import_task(job_id: int) -> Any:
    """Import the conversations of a queued import job (checkpoints.foreign)."""
    job = import_job_run(job_id=job_id)
    return job.status if job is not None else "not queued"
