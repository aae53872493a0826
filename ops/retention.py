"""The retention rules. Each run is audited (ops.audit) and each can be a dry run, which changes
nothing and records what it would do.

- `prune_auto_checkpoints`: automatic checkpoints older than RETENTION_AUTO_CHECKPOINT_DAYS are
  deleted, keeping the newest RETENTION_KEEP_LATEST_AUTO of each branch, every named checkpoint
  and every checkpoint a branch was forked from.
- `archive_idle_sessions`: sessions untouched for RETENTION_ARCHIVE_DAYS are archived (hidden from
  the list, brought back by their owner), never deleted.

0 days turns a rule off. A record lists ids and times, never a name or any text of the users'.
The work itself is done by the domain's services, session by session
under the session's lock, announcing each change as any other way of making it would.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from checkpoints.selectors import auto_checkpoints_beyond
from checkpoints.services import checkpoint_cleanup_auto
from core.errors import InvalidInput
from sessions_app.selectors import sessions_idle
from sessions_app.services import session_archive_if_idle

from .audit import Outcome, Progress, Who, listed, run_audited
from .models import AuditRecord


def _count(value: Any, default: int, name: str) -> int:
    """A rule's parameter: a whole number of 0 or more (from a schedule's keyword arguments, a
    command's option or the settings). A refused one fails the run, and its record says why."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{name} must be a whole number of 0 or more, not {value!r}.")
    return value


def _parameters(**given: tuple[Any, int]) -> dict[str, Any]:
    """The parameters a record shows: each as given (a schedule's keyword argument, a command's
    option; kept as it came, even when it is refused), else the setting's value."""
    return {name: default if value is None else value for name, (value, default) in given.items()}


def prune_auto_checkpoints(
    *,
    who: Who,
    dry_run: bool = False,
    days: int | None = None,
    keep_latest: int | None = None,
) -> AuditRecord:
    def work(progress: Progress) -> Outcome:
        days_ = _count(days, settings.RETENTION_AUTO_CHECKPOINT_DAYS, "days")
        keep = _count(keep_latest, settings.RETENTION_KEEP_LATEST_AUTO, "keep_latest")
        if days_ == 0:
            return Outcome(details={"off": "RETENTION_AUTO_CHECKPOINT_DAYS is 0"})
        before = timezone.now() - timedelta(days=days_)
        if dry_run:
            rows = list(
                auto_checkpoints_beyond(keep_latest=keep, older_than=before)
                .order_by("branch__session_id", "branch_id", "created_at", "id")
                .values("id", "branch_id", "branch__session_id", "created_at")
            )
            return Outcome(
                affected=len(rows),
                details={
                    "checkpoints": listed(
                        [
                            {
                                "id": row["id"],
                                "session": row["branch__session_id"],
                                "branch": row["branch_id"],
                                "created_at": row["created_at"].isoformat(),
                            }
                            for row in rows
                        ]
                    ),
                    "sessions": len({row["branch__session_id"] for row in rows}),
                },
            )
        deleted: list[int] = []
        sessions: list[int] = []

        def done(session_id: int, ids: list[int]) -> None:
            deleted.extend(ids)
            sessions.append(session_id)
            progress()

        checkpoint_cleanup_auto(keep_latest=keep, older_than=before, on_session=done)
        return Outcome(
            affected=len(deleted),
            details={"checkpoints": listed(deleted), "sessions": len(sessions)},
        )

    return run_audited(
        rule=AuditRecord.Rule.PRUNE_AUTO_CHECKPOINTS,
        who=who,
        dry_run=dry_run,
        parameters=_parameters(
            days=(days, settings.RETENTION_AUTO_CHECKPOINT_DAYS),
            keep_latest=(keep_latest, settings.RETENTION_KEEP_LATEST_AUTO),
        ),
        work=work,
    )


def archive_idle_sessions(
    *, who: Who, dry_run: bool = False, days: int | None = None
) -> AuditRecord:
    def work(progress: Progress) -> Outcome:
        days_ = _count(days, settings.RETENTION_ARCHIVE_DAYS, "days")
        if days_ == 0:
            return Outcome(details={"off": "RETENTION_ARCHIVE_DAYS is 0"})
        since = timezone.now() - timedelta(days=days_)
        candidates = list(
            sessions_idle(since=since)
            .order_by("updated_at", "id")
            .values("id", "owner_id", "updated_at")
        )
        if dry_run:
            archived = candidates
        else:
            archived = []
            for row in candidates:
                if session_archive_if_idle(session_id=row["id"], since=since):
                    archived.append(row)
                progress()
        return Outcome(
            affected=len(archived),
            details={
                "sessions": listed(
                    [
                        {
                            "id": row["id"],
                            "owner": row["owner_id"],
                            "last_activity": row["updated_at"].isoformat(),
                        }
                        for row in archived
                    ]
                )
            },
        )

    return run_audited(
        rule=AuditRecord.Rule.ARCHIVE_IDLE_SESSIONS,
        who=who,
        dry_run=dry_run,
        parameters=_parameters(days=(days, settings.RETENTION_ARCHIVE_DAYS)),
        work=work,
    )
