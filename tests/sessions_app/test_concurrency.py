"""Several users (threads) writing at once: no lost message, no duplicate position, never two
current branches, never "database is locked"."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.db import connection

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create, checkpoint_delete, checkpoint_restore
from core.errors import NotFound
from sessions_app.errors import SessionLimitReached
from sessions_app.models import Branch, Message, Session
from sessions_app.selectors import branch_history
from sessions_app.services import branch_activate, message_append, session_create

ROOT = Path(__file__).resolve().parents[2]


def _run_threads(work, n: int) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def runner(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_get_distinct_dense_positions(alice):
    session = session_create(owner=alice, name="busy")
    branch = Branch.objects.get(session=session)

    def work(i: int) -> None:
        for j in range(10):
            message_append(branch=branch, role="user", content=f"{i}-{j}")

    assert _run_threads(work, 6) == []
    positions = sorted(Message.objects.filter(branch=branch).values_list("position", flat=True))
    assert positions == list(range(60))
    branch.refresh_from_db()
    assert branch.message_count == 60


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_restores_and_activations_keep_exactly_one_current_branch(alice):
    session = session_create(owner=alice, name="busy")
    root = Branch.objects.get(session=session)
    message_append(branch=root, role="user", content="hi")
    cp = checkpoint_create(branch=root, name="cp")

    def work(i: int) -> None:
        for _ in range(5):
            if i % 2:
                checkpoint_restore(checkpoint=cp)
            else:
                branch_activate(branch=root)

    assert _run_threads(work, 6) == []
    assert Branch.objects.filter(session=session, is_current=True).count() == 1
    assert Branch.objects.filter(session=session).count() == 1 + 3 * 5


def assert_branches_consistent(session) -> None:
    """Every checkpoint lies within its branch; every branch's own messages have dense positions
    from its fork point to its end; exactly one branch is current."""
    branches = list(Branch.objects.filter(session=session))
    assert sum(b.is_current for b in branches) == 1
    for b in branches:
        own = list(
            Message.objects.filter(branch=b).order_by("position").values_list("position", flat=True)
        )
        assert own == list(range(b.fork_position, b.message_count)), f"gap in branch {b.pk}"
        if b.parent_id is not None:
            parent = next(p for p in branches if p.pk == b.parent_id)
            assert b.fork_position <= parent.message_count, f"branch {b.pk} forks past its parent"
        for cp in Checkpoint.objects.filter(branch=b):
            assert b.fork_position <= cp.message_count <= b.message_count, (
                f"checkpoint {cp.pk} at {cp.message_count} outside branch {b.pk} "
                f"({b.fork_position}..{b.message_count})"
            )
        assert b.checkpoint_count == Checkpoint.objects.filter(branch=b).count()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_checkpoint_create_racing_a_rewind_never_leaves_a_checkpoint_past_the_end(alice):
    for round_ in range(25):
        session = session_create(owner=alice, name=f"race {round_}")
        root = Branch.objects.get(session=session)
        for i in range(6):
            message_append(branch=root, role="user" if i % 2 == 0 else "assistant", content=str(i))
        early = checkpoint_create(branch=root, name="early", at=2)

        def work(i: int, root=root, early=early) -> None:
            if i == 0:
                checkpoint_restore(checkpoint=early, mode="rewind")
            else:
                checkpoint_create(branch=root, name=f"late-{i}")

        assert _run_threads(work, 3) == []
        assert_branches_consistent(session)
        # Restoring whatever survived makes a branch without gaps.
        for cp in Checkpoint.objects.filter(branch__session=session):
            restored = checkpoint_restore(checkpoint=cp).branch
            assert len(branch_history(restored)) == cp.message_count
        assert_branches_consistent(session)


def _pick(model, **filters):
    return model.objects.filter(**filters).order_by("?").first()


def _structural_change(session, op: str, i: int) -> None:
    """One change of the session's structure, on a branch or checkpoint picked at random."""
    if op == "append":
        message_append(branch=_pick(Branch, session=session), role="user", content=f"{i}")
    elif op == "checkpoint":
        checkpoint_create(branch=_pick(Branch, session=session), name=f"t{i}")
    elif op in ("branch", "rewind"):
        cp = _pick(Checkpoint, branch__session=session)
        if cp is not None:
            checkpoint_restore(checkpoint=cp, mode=op)
    elif op == "activate":
        branch_activate(branch=_pick(Branch, session=session))
    else:
        cp = _pick(Checkpoint, branch__session=session)
        if cp is not None:
            checkpoint_delete(checkpoint=cp)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_threads_of_mixed_structural_changes_keep_every_branch_whole(alice):
    session = session_create(owner=alice, name="storm")
    root = Branch.objects.get(session=session)
    for i in range(4):
        message_append(branch=root, role="user", content=f"seed {i}")
    checkpoint_create(branch=root, name="seed")
    refused: list[str] = []

    def work(i: int) -> None:
        rng = random.Random(i)  # noqa: S311 - a seeded sequence, not a secret
        for _ in range(12):
            op = rng.choice(["append", "checkpoint", "branch", "rewind", "activate", "delete"])
            try:
                _structural_change(session, op, i)
            except NotFound as exc:  # deleted by another thread meanwhile: a clean 404
                refused.append(exc.message)

    assert _run_threads(work, 20) == []
    assert_branches_consistent(session)
    for branch in Branch.objects.filter(session=session):
        assert len(branch_history(branch)) == branch.message_count


SQLITE_SCRIPT = r"""
import json, os, sys, threading
import django
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
from accounts.models import User
from sessions_app.errors import SessionLimitReached
from sessions_app.models import Session, Branch, Message
from sessions_app.services import message_append, session_create
from checkpoints.services import checkpoint_create

users = [User.objects.create_user(f"user{i}") for i in range(6)]
shared = session_create(owner=users[0], name="shared")
branch = Branch.objects.get(session=shared)
errors = []
barrier = threading.Barrier(len(users))

def work(i):
    try:
        barrier.wait()
        own = session_create(owner=users[i], name=f"own {i}")
        own_branch = Branch.objects.get(session=own)
        for j in range(15):
            message_append(branch=branch, role="user", content=f"{i}-{j}")
            message_append(branch=own_branch, role="user", content=f"{i}-{j}")
            if j % 5 == 0:
                checkpoint_create(branch=own_branch, name=f"cp-{j}")
    except BaseException as exc:
        errors.append(repr(exc))
    finally:
        connection.close()

threads = [threading.Thread(target=work, args=(i,)) for i in range(len(users))]
for t in threads: t.start()
for t in threads: t.join(120)
with connection.cursor() as c:
    c.execute("PRAGMA journal_mode")
    mode = c.fetchone()[0]
positions = sorted(Message.objects.filter(branch=branch).values_list("position", flat=True))
print(json.dumps({"errors": errors, "positions": positions, "journal_mode": mode}))
"""


def test_the_default_sqlite_database_takes_concurrent_writers(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "ROLLBACK_REQUIRE_POSTGRES"}
    }
    env.update(DJANGO_SETTINGS_MODULE="rollback_site.settings", ROLLBACK_VAR_DIR=str(tmp_path))
    done = subprocess.run(  # noqa: S603 - the test's own argument list, no shell
        [sys.executable, "-c", SQLITE_SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == []
    assert result["journal_mode"] == "wal"
    assert result["positions"] == list(range(6 * 15))
    assert (tmp_path / "rollback.sqlite3").exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_simultaneous_creations_never_pass_the_sessions_per_user_limit(alice, settings):
    """session_create counts the owner's sessions under a lock on the owner's row."""
    settings.ROLLBACK_MAX_SESSIONS_PER_USER = 3
    errors = _run_threads(lambda i: session_create(owner=alice, name=f"s{i}"), 8)
    assert len(errors) == 5, errors
    assert all(isinstance(e, SessionLimitReached) for e in errors), errors
    assert Session.objects.filter(owner=alice).count() == 3
