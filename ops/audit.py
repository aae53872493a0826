"""Every run of an operator's job leaves an audit record (ops.models.AuditRecord): opened when the
run starts, closed with what it did, or failed with why. A real run of a rule holds the rule while
it runs (a partial unique index), so an overlapping second run is recorded as skipped and does
nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from .models import AuditRecord

if TYPE_CHECKING:
    from accounts.models import User

# A running record whose run made no progress for this long was left by a process that died: it
# no longer holds its rule.
ABANDONED_AFTER = timedelta(minutes=10)
# How often a long run touches its record's `progress_at`.
PROGRESS_EVERY_SECONDS = 10.0
# The most ids or rows a record lists (it counts them all).
DETAILS_MAX_ITEMS = 200


@dataclass(frozen=True)
class Who:
    """Who or what started a run: a schedule (by name), the task queued by hand, a command (with
    the operator's name) or an admin action (with the staff user)."""

    trigger: str
    actor: User | None = None
    name: str = ""
    schedule: str = ""

    @classmethod
    def schedule_named(cls, name: str | None) -> Who:
        if name:
            return cls(trigger=AuditRecord.Trigger.SCHEDULE, schedule=name[:200])
        return cls(trigger=AuditRecord.Trigger.TASK)

    @classmethod
    def command(cls, name: str) -> Who:
        return cls(trigger=AuditRecord.Trigger.COMMAND, name=name[:150])

    @classmethod
    def admin(cls, user: User) -> Who:
        return cls(trigger=AuditRecord.Trigger.ADMIN, actor=user, name=user.get_username())


@dataclass
class Outcome:
    """What a run did (or, dry, would do): how many objects, and which."""

    affected: int = 0
    details: dict[str, Any] = field(default_factory=dict)


class Progress:
    """Passed to the work: call it as the run advances; it touches the record now and then, so a
    long run is not taken for an abandoned one."""

    def __init__(self, record: AuditRecord) -> None:
        self.record = record
        self._last = time.monotonic()

    def __call__(self) -> None:
        if time.monotonic() - self._last < PROGRESS_EVERY_SECONDS:
            return
        self._last = time.monotonic()
        AuditRecord.objects.filter(pk=self.record.pk).update(progress_at=timezone.now())


def listed(items: list[Any]) -> dict[str, Any]:
    """A list as a record keeps it: the first DETAILS_MAX_ITEMS, and how many there were."""
    return {"count": len(items), "items": items[:DETAILS_MAX_ITEMS]}


def run_audited(
    *,
    rule: str,
    who: Who,
    dry_run: bool,
    parameters: dict[str, Any],
    work: Callable[[Progress], Outcome],
    target: str = "",
) -> AuditRecord:
    """Run `work` under an audit record and return the record: `done` with the outcome, `failed`
    with the error (which is raised again), or `skipped` without running when a real run of the
    same rule (on the same target) is under way."""
    now = timezone.now()
    AuditRecord.objects.filter(
        rule=rule,
        target=target,
        status=AuditRecord.Status.RUNNING,
        progress_at__lt=now - ABANDONED_AFTER,
    ).update(
        status=AuditRecord.Status.FAILED,
        finished_at=now,
        error="Abandoned: the process running it stopped before it finished.",
    )
    fields: dict[str, Any] = {
        "rule": rule,
        "target": target,
        "dry_run": dry_run,
        "trigger": who.trigger,
        "actor": who.actor,
        "actor_name": who.name,
        "schedule": who.schedule,
        "parameters": parameters,
    }
    try:
        with transaction.atomic():
            record = AuditRecord.objects.create(**fields)
    except IntegrityError:
        running = (
            AuditRecord.objects.filter(
                rule=rule, target=target, status=AuditRecord.Status.RUNNING, dry_run=False
            )
            .order_by("started_at")
            .first()
        )
        since = f" since {running.started_at:%Y-%m-%d %H:%M:%S} UTC" if running else ""
        return AuditRecord.objects.create(
            **fields,
            status=AuditRecord.Status.SKIPPED,
            finished_at=timezone.now(),
            error=f"Another run of this rule was under way{since}: this one did nothing.",
        )
    try:
        outcome = work(Progress(record))
    except Exception as exc:
        record.status = AuditRecord.Status.FAILED
        record.error = f"{type(exc).__name__}: {exc}"[:10_000]
        record.finished_at = timezone.now()
        record.save(update_fields=["status", "error", "finished_at"])
        raise
    record.status = AuditRecord.Status.DONE
    record.affected = outcome.affected
    record.details = outcome.details
    record.finished_at = record.progress_at = timezone.now()
    record.save(update_fields=["status", "affected", "details", "finished_at", "progress_at"])
    return record
