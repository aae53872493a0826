"""The retention rules, on SQLite and again on PostgreSQL (the suite's second phase): what each
deletes or archives and what it never touches, their dry runs, their audit records, an
overlapping second run, and bad parameters."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create, checkpoint_restore
from core.errors import InvalidInput
from ops.audit import Who
from ops.models import AuditRecord
from ops.retention import archive_idle_sessions, prune_auto_checkpoints
from ops.tasks import archive_idle_sessions_task, prune_auto_checkpoints_task
from sessions_app.models import Branch, Session, Turn
from sessions_app.services import session_create, session_update
from sessions_app.turns import turn_start
from tests.conftest import say

pytestmark = pytest.mark.django_db(transaction=True)

OPERATOR = Who.command("operator")


def aged(*objs, days: float) -> None:
    """Make checkpoints (or sessions) look `days` old."""
    when = timezone.now() - timedelta(days=days)
    for obj in objs:
        if isinstance(obj, Checkpoint):
            Checkpoint.objects.filter(pk=obj.pk).update(created_at=when)
        else:
            Session.objects.filter(pk=obj.pk).update(updated_at=when)


def autos(branch, n: int, days: float, prefix: str = "auto") -> list[Checkpoint]:
    made = []
    for i in range(n):
        say(branch, f"{prefix} q{i}", f"{prefix} a{i}")
        checkpoint = checkpoint_create(branch=branch, name=f"{prefix}-{i}", is_auto=True)
        aged(checkpoint, days=days + (n - i) / 100)  # the later, the newer
        made.append(checkpoint)
    return made


def left(*checkpoints: Checkpoint) -> set[int]:
    return set(
        Checkpoint.objects.filter(pk__in=[c.pk for c in checkpoints]).values_list("pk", flat=True)
    )


@pytest.fixture
def retention(settings):
    settings.RETENTION_AUTO_CHECKPOINT_DAYS = 7
    settings.RETENTION_KEEP_LATEST_AUTO = 2
    settings.RETENTION_ARCHIVE_DAYS = 30
    return settings


def test_old_automatic_checkpoints_go_but_the_newest_named_and_fork_points_stay(
    retention, session, branch
):
    old = autos(branch, 6, days=20)
    fresh = autos(branch, 1, days=0, prefix="fresh")
    named = checkpoint_create(branch=branch, name="keep me")
    aged(named, days=400)
    fork_point = old[0]
    restored = checkpoint_restore(checkpoint=fork_point, mode="branch").branch
    other = autos(restored, 3, days=20, prefix="other")

    record = prune_auto_checkpoints(who=OPERATOR)

    # The newest 2 automatic ones of each branch stay whatever their age (on the first branch the
    # fresh one and the newest old one); the fork point and the named one stay; the rest go.
    kept = {old[-1].pk, fresh[0].pk, named.pk, fork_point.pk, other[-1].pk, other[-2].pk}
    assert left(*old, *fresh, named, *other) == kept
    assert record.status == AuditRecord.Status.DONE
    assert record.affected == 5
    assert sorted(record.details["checkpoints"]["items"]) == sorted(
        c.pk for c in [*old[1:-1], other[0]]
    )
    assert record.details["sessions"] == 1
    assert record.parameters == {"days": 7, "keep_latest": 2}
    assert (record.trigger, record.actor_name, record.dry_run) == ("command", "operator", False)
    branch.refresh_from_db()
    restored.refresh_from_db()
    assert branch.checkpoint_count == 4  # old[0], old[-1], fresh, named
    assert restored.checkpoint_count == 2
    assert restored.forked_from_id == fork_point.pk


def test_keep_latest_zero_and_days_beyond_everything(retention, session, branch):
    made = autos(branch, 3, days=10)
    assert prune_auto_checkpoints(who=OPERATOR, days=30, keep_latest=0).affected == 0
    assert prune_auto_checkpoints(who=OPERATOR, days=5, keep_latest=0).affected == 3
    assert left(*made) == set()


def test_zero_days_turns_the_rule_off(retention, session, branch):
    made = autos(branch, 4, days=100)
    retention.RETENTION_AUTO_CHECKPOINT_DAYS = 0
    record = prune_auto_checkpoints(who=OPERATOR)
    assert record.affected == 0
    assert record.details == {"off": "RETENTION_AUTO_CHECKPOINT_DAYS is 0"}
    assert left(*made) == {c.pk for c in made}


def test_a_dry_run_changes_nothing_and_records_what_it_would_do(retention, session, branch):
    made = autos(branch, 5, days=20)
    record = prune_auto_checkpoints(who=OPERATOR, dry_run=True)
    assert left(*made) == {c.pk for c in made}
    assert record.dry_run
    assert record.affected == 3
    items = record.details["checkpoints"]["items"]
    assert [item["id"] for item in items] == [c.pk for c in made[:3]]
    assert {item["session"] for item in items} == {session.pk}
    real = prune_auto_checkpoints(who=OPERATOR)
    assert sorted(real.details["checkpoints"]["items"]) == [c.pk for c in made[:3]]


def test_a_second_run_does_nothing_twice(retention, session, branch):
    autos(branch, 5, days=20)
    first = prune_auto_checkpoints(who=OPERATOR)
    second = prune_auto_checkpoints(who=OPERATOR)
    assert (first.affected, second.affected) == (3, 0)


def test_an_overlapping_run_of_the_same_rule_is_skipped_and_recorded(retention, session, branch):
    made = autos(branch, 5, days=20)
    # A real run under way (its record holds the rule) ...
    running = AuditRecord.objects.create(
        rule=AuditRecord.Rule.PRUNE_AUTO_CHECKPOINTS, trigger="schedule", schedule="nightly"
    )
    second = prune_auto_checkpoints(who=OPERATOR)
    assert second.status == AuditRecord.Status.SKIPPED
    assert "under way" in second.error
    assert left(*made) == {c.pk for c in made}
    # ... while a dry run, or another rule, still runs.
    assert prune_auto_checkpoints(who=OPERATOR, dry_run=True).status == "done"
    assert archive_idle_sessions(who=OPERATOR).status == "done"
    # A run abandoned by a process that died (no progress for ten minutes) no longer holds it.
    AuditRecord.objects.filter(pk=running.pk).update(
        progress_at=timezone.now() - timedelta(minutes=11)
    )
    assert prune_auto_checkpoints(who=OPERATOR).affected == 3
    running.refresh_from_db()
    assert running.status == AuditRecord.Status.FAILED
    assert "Abandoned" in running.error


@pytest.mark.postgres
def test_two_runs_at_once_delete_each_checkpoint_once(retention, alice):
    """Two processes start the rule at the same moment: one does the work, the other is
    skipped; nothing is deleted or announced twice."""
    sessions = [session_create(owner=alice, name=f"s{i}") for i in range(4)]
    for s in sessions:
        autos(Branch.objects.get(session=s), 4, days=20)
    barrier = threading.Barrier(2)
    records: list[AuditRecord] = []

    def run() -> None:
        barrier.wait()
        try:
            records.append(prune_auto_checkpoints(who=OPERATOR))
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    statuses = sorted(r.status for r in records)
    done = [r for r in records if r.status == "done"]
    total = sum(r.affected for r in done)
    assert total == 8, statuses
    ids = [pk for r in done for pk in r.details["checkpoints"]["items"]]
    assert len(ids) == len(set(ids)) == 8
    assert Checkpoint.objects.filter(is_auto=True).count() == 8


def test_idle_sessions_are_archived_never_deleted_and_their_owner_brings_them_back(
    retention, alice, bob
):
    idle = session_create(owner=alice, name="old trip")
    say(Branch.objects.get(session=idle), "where to?", "Lisbon")
    recent = session_create(owner=alice, name="today")
    bobs = session_create(owner=bob, name="bob's old")
    busy = session_create(owner=bob, name="old but answering")
    turn_start(session=busy, message="still thinking")
    aged(idle, bobs, busy, days=31)
    aged(recent, days=29)

    record = archive_idle_sessions(who=OPERATOR)

    archived = set(Session.objects.filter(archived_at__isnull=False).values_list("pk", flat=True))
    assert archived == {idle.pk, bobs.pk}
    assert record.affected == 2
    assert {item["id"] for item in record.details["sessions"]["items"]} == {idle.pk, bobs.pk}
    assert Session.objects.count() == 4  # nothing deleted
    assert Branch.objects.get(session=idle).message_count == 2
    # The owner brings it back (the page and the API go through session_update), and it is not
    # archived again the next night: bringing it back touched it.
    session_update(session=Session.objects.get(pk=idle.pk), archived=False)
    assert archive_idle_sessions(who=OPERATOR).affected == 0
    assert Session.objects.get(pk=idle.pk).archived_at is None


def test_archiving_dry_run_changes_nothing(retention, alice):
    idle = session_create(owner=alice, name="old")
    aged(idle, days=60)
    record = archive_idle_sessions(who=OPERATOR, dry_run=True)
    assert record.affected == 1
    assert record.dry_run
    assert Session.objects.get(pk=idle.pk).archived_at is None


def test_a_session_touched_after_the_selection_is_not_archived(retention, alice):
    """The rule chooses again under each session's lock."""
    from sessions_app.services import session_archive_if_idle

    idle = session_create(owner=alice, name="old")
    aged(idle, days=60)
    since = timezone.now() - timedelta(days=30)
    say(Branch.objects.get(session=idle), "I'm back")  # a message touches the session
    assert session_archive_if_idle(session_id=idle.pk, since=since) is False
    assert session_archive_if_idle(session_id=10**9, since=since) is False


def test_bad_parameters_fail_the_run_with_a_clear_record_and_change_nothing(
    retention, session, branch
):
    made = autos(branch, 4, days=20)
    for bad in (-1, "3", 2.5, True):
        with pytest.raises(InvalidInput, match="whole number of 0 or more"):
            prune_auto_checkpoints(who=OPERATOR, keep_latest=bad)
    record = AuditRecord.objects.filter(status="failed").first()
    assert record is not None
    assert "keep_latest must be a whole number" in record.error
    assert record.parameters["keep_latest"] is True
    assert left(*made) == {c.pk for c in made}


def test_the_tasks_record_the_schedule_that_ran_them(retention, session, branch, celery_eager):
    autos(branch, 4, days=20)
    result = prune_auto_checkpoints_task.apply(
        kwargs={"keep_latest": 3}, headers={"periodic_task_name": "Nightly checkpoints"}
    ).get()
    record = AuditRecord.objects.get(pk=result["audit"])
    assert (record.trigger, record.schedule, record.affected) == (
        "schedule",
        "Nightly checkpoints",
        1,
    )
    assert record.by == "schedule “Nightly checkpoints”"
    queued = archive_idle_sessions_task.apply().get()
    assert AuditRecord.objects.get(pk=queued["audit"]).trigger == "task"


def test_a_fresh_database_has_the_default_schedules_for_the_admin_to_edit(tmp_path):
    """`migrate` puts the rules' nightly schedules in django-celery-beat's tables (where the
    admin edits them, and beat reads them)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["ROLLBACK_VAR_DIR"] = str(tmp_path)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, timeout=120)  # noqa: S603 - the test's own argument list, no shell
    shown = subprocess.run(  # noqa: S603 - the test's own argument list, no shell
        [
            *manage,
            "shell",
            "-c",
            "from django_celery_beat.models import PeriodicTask as P; "
            "[print(p.task, p.name, p.crontab.hour, p.enabled, sep='|') for p in P.objects.all()]",
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.splitlines()
    assert sorted(line for line in shown if "|" in line) == [
        "ops.archive_idle_sessions|Archive idle sessions|3|True",
        "ops.prune_auto_checkpoints|Delete old automatic checkpoints|3|True",
    ]


# --- The commands ---------------------------------------------------------------------------


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_the_prune_command_and_its_dry_run(retention, session, branch):
    made = autos(branch, 5, days=20)
    out = run("prune_auto_checkpoints", "--dry-run")
    assert "Delete old automatic checkpoints (dry run): would change 3" in out
    assert f'"id": {made[0].pk}' in out
    assert left(*made) == {c.pk for c in made}
    out = run("prune_auto_checkpoints", "--keep-latest", "4")
    assert "changed 1 " in out
    assert left(*made) == {c.pk for c in made[1:]}
    assert AuditRecord.objects.filter(trigger="command").count() == 2


def test_the_archive_command_and_its_dry_run(retention, alice):
    idle = session_create(owner=alice, name="old")
    aged(idle, days=8)
    assert "would change 0" in run("archive_idle_sessions", "--dry-run")
    assert "would change 1" in run("archive_idle_sessions", "--dry-run", "--days", "7")
    assert "changed 1 " in run("archive_idle_sessions", "--days", "7")
    assert Session.objects.get(pk=idle.pk).archived_at is not None


@pytest.mark.parametrize("value", ["-1", "many", "1.5"])
def test_the_commands_refuse_bad_numbers_before_anything_runs(retention, value):
    with pytest.raises(CommandError, match="whole number of 0 or more"):
        run("prune_auto_checkpoints", "--days", value)
    with pytest.raises(CommandError, match="whole number of 0 or more"):
        run("archive_idle_sessions", "--days", value)
    assert not AuditRecord.objects.exists()


def test_a_command_that_overlaps_a_run_says_so(retention):
    AuditRecord.objects.create(rule=AuditRecord.Rule.ARCHIVE_IDLE_SESSIONS, trigger="schedule")
    with pytest.raises(CommandError, match="under way"):
        run("archive_idle_sessions")


def test_turns_are_left_alone(retention, session, branch):
    """Archiving a session with a finished turn keeps the turn."""
    turn_start(session=session, message="hello")
    Turn.objects.update(status="done")
    aged(session, days=31)
    assert archive_idle_sessions(who=OPERATOR).affected == 1
    assert Turn.objects.filter(session=session).count() == 1
