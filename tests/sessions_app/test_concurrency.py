"""Several users (threads) writing at once: no lost message, no duplicate position, never two
current branches, never "database is locked"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.db import connection

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import InternalSession, Message
from sessions_app.services import branch_activate, message_append, session_create

ROOT = Path(__file__).resolve().parents[2]


def _run_threads(work, n: int) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def runner(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
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
    branch = InternalSession.objects.get(session=session)

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
    root = InternalSession.objects.get(session=session)
    message_append(branch=root, role="user", content="hi")
    cp = checkpoint_create(branch=root, name="cp")

    def work(i: int) -> None:
        for _ in range(5):
            if i % 2:
                checkpoint_restore(checkpoint=cp)
            else:
                branch_activate(branch=root)

    assert _run_threads(work, 6) == []
    assert InternalSession.objects.filter(session=session, is_current=True).count() == 1
    assert InternalSession.objects.filter(session=session).count() == 1 + 3 * 5


SQLITE_SCRIPT = r"""
import json, os, sys, threading
import django
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
from accounts.models import User
from sessions_app.models import InternalSession, Message
from sessions_app.services import message_append, session_create
from checkpoints.services import checkpoint_create

users = [User.objects.create_user(f"user{i}") for i in range(6)]
shared = session_create(owner=users[0], name="shared")
branch = InternalSession.objects.get(session=shared)
errors = []
barrier = threading.Barrier(len(users))

def work(i):
    try:
        barrier.wait()
        own = session_create(owner=users[i], name=f"own {i}")
        own_branch = InternalSession.objects.get(session=own)
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
    done = subprocess.run(
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
