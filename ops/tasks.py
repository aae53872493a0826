"""Celery tasks of the operator's jobs: thin adapters over ops.retention. Beat runs them from the
schedules in the admin ("Periodic tasks"), whose keyword arguments may set `days` and
`keep_latest`; each run leaves an audit record naming its schedule."""

from __future__ import annotations

from typing import Any, TypedDict

from celery import shared_task

from accounts.models import User

from .audit import Who
from .models import AuditRecord
from .retention import archive_idle_sessions, prune_auto_checkpoints


class TaskResult(TypedDict):
    """What a job's task returns (kept in Celery's result backend, when there is one)."""

    audit: int
    status: str
    affected: int


def _result(record: AuditRecord) -> TaskResult:
    return {"audit": record.pk, "status": record.status, "affected": record.affected}


def _who(task: Any, actor: int | None) -> Who:
    """The staff user who queued the run from the admin, else the schedule that beat ran it from
    (django-celery-beat names it in the message's headers)."""
    if actor is not None:
        user = User.objects.filter(pk=actor).first()
        return Who.admin(user) if user is not None else Who(trigger=AuditRecord.Trigger.ADMIN)
    request = task.request
    headers = request.headers if isinstance(request.headers, dict) else {}
    # A worker makes the message's headers attributes of the request; an eager run keeps them
    # in `headers`.
    return Who.schedule_named(
        getattr(request, "periodic_task_name", None) or headers.get("periodic_task_name")
    )


@shared_task(name="ops.prune_auto_checkpoints", bind=True)  # type: ignore[untyped-decorator]
def prune_auto_checkpoints_task(
    self: Any,
    days: int | None = None,
    keep_latest: int | None = None,
    dry_run: bool = False,
    actor: int | None = None,
) -> TaskResult:
    return _result(
        prune_auto_checkpoints(
            who=_who(self, actor), dry_run=dry_run, days=days, keep_latest=keep_latest
        )
    )


@shared_task(name="ops.archive_idle_sessions", bind=True)  # type: ignore[untyped-decorator]
def archive_idle_sessions_task(
    self: Any, days: int | None = None, dry_run: bool = False, actor: int | None = None
) -> TaskResult:
    return _result(archive_idle_sessions(who=_who(self, actor), dry_run=dry_run, days=days))


# The rules an operator can run from the admin, by the rule's name in the audit records.
RULE_TASKS = {
    AuditRecord.Rule.PRUNE_AUTO_CHECKPOINTS: prune_auto_checkpoints_task,
    AuditRecord.Rule.ARCHIVE_IDLE_SESSIONS: archive_idle_sessions_task,
}
