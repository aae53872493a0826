"""The audit trail of the operator's jobs: every run of a retention rule or an erasure, whoever or
whatever started it (a schedule, a command, the admin), with what it did or, in a dry run, would
have done."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.validation import time_in_range


class AuditRecord(models.Model):
    class Rule(models.TextChoices):
        PRUNE_AUTO_CHECKPOINTS = "prune_auto_checkpoints", "Delete old automatic checkpoints"
        ARCHIVE_IDLE_SESSIONS = "archive_idle_sessions", "Archive idle sessions"
        ERASE_USER = "erase_user", "Erase a user's data"
        APPROVE_ACCOUNTS = "approve_accounts", "Approve accounts"
        REFUSE_ACCOUNTS = "refuse_accounts", "Refuse accounts"

    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        # Another run of the same rule (on the same target) was under way: this one did nothing.
        SKIPPED = "skipped"
        FAILED = "failed"

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule"  # beat, from a schedule of "Periodic tasks"
        TASK = "task"  # the task queued by hand (the admin's "Run selected tasks")
        COMMAND = "command"  # a management command
        ADMIN = "admin"  # an admin action

    rule = models.CharField(max_length=40, choices=Rule.choices)
    # What the rule ran on: empty for the whole site, "user 42" for an erasure.
    target = models.CharField(max_length=100, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    dry_run = models.BooleanField(default=False)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    # Who started it by hand (the admin), or the name given by a command's operator; the
    # schedule's name when beat started it.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150, blank=True, default="")
    schedule = models.CharField(max_length=200, blank=True, default="")
    # The rule's settings for this run (days, keep_latest).
    parameters = models.JSONField(default=dict, blank=True)
    # How many objects it deleted or archived (or would have, in a dry run).
    affected = models.PositiveIntegerField(default=0)
    # Which ones: ids by kind, and counts of rows by table for an erasure.
    details = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(default=timezone.now, db_index=True)
    # Touched while the run makes progress: a "running" record left by a process that died is
    # recognised by it and no longer holds the rule.
    progress_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering: ClassVar[list[str]] = ["-started_at", "-id"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            # One real run of a rule (on one target) at a time: an overlapping second run is
            # refused by the database and recorded as skipped.
            models.UniqueConstraint(
                fields=["rule", "target"],
                condition=Q(status="running", dry_run=False),
                name="one_running_audit_per_rule",
            ),
            time_in_range("started_at", name="audit_started_at_in_range"),
            time_in_range("progress_at", name="audit_progress_at_in_range"),
            time_in_range("finished_at", name="audit_finished_at_in_range", null=True),
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["rule", "-started_at"], name="audit_rule_started")
        ]

    def __str__(self) -> str:
        what = self.get_rule_display()
        return f"{what}{' (dry run)' if self.dry_run else ''}, {self.started_at:%Y-%m-%d %H:%M}"

    @property
    def by(self) -> str:
        """Who or what started the run, as the admin shows it."""
        if self.trigger == self.Trigger.SCHEDULE:
            return f"schedule “{self.schedule}”" if self.schedule else "schedule"
        name = self.actor.get_username() if self.actor is not None else self.actor_name
        return f"{self.trigger}: {name}" if name else str(self.trigger)
