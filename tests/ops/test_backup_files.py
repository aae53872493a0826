"""`manage.py backup PATH` keeps the workspace: its file versions, their contents, and the marks
of checkpoints and branches that say which versions each one sees; and the effects ledger,
whose entries outlive the branches they name. (The backup copies the whole database, so every
table is in it; these tests hold that for the workspace's and the ledger's.) The SQLite test
runs in the SQLite phase of `make test`, the one marked `postgres` in the PostgreSQL phase, on
databases of its own."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from tests import prebuilt
from tests.ops.test_backup import PgServer
from tests.procs import app_env, manage

ON_POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres", "postgresql"))

# A session with files on two branches: a checkpoint, later writes and a deletion, a restore.
WRITE_FILES = """
from accounts.models import User
from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import Branch
from sessions_app.services import session_create
from workspace.services import file_delete, file_write
owner = User.objects.create_user("alice")
session = session_create(owner=owner, name="Files")
branch = Branch.objects.get(session=session, is_current=True)
file_write(branch=branch, path="a.txt", content="one")
file_write(branch=branch, path="notes/b.md", content="# b")
cp = checkpoint_create(branch=branch, name="cp")
file_write(branch=branch, path="a.txt", content="two")
file_delete(branch=branch, path="notes/b.md")
side = checkpoint_restore(checkpoint=cp).branch
file_write(branch=side, path="side.txt", content="three")
from sessions_app.models import LedgerEntry
for ref, status in ((branch.pk, "ran"), (side.pk, "may_have_run"), (None, "failed")):
    LedgerEntry.objects.create(session=session, user=owner, branch_ref=ref, position=0,
        tool_name="send_message", tool_args={"to": "bob"}, tool_result="sent", status=status)
"""

# The workspace's tables, and the columns of other tables that hold its marks.
QUERIES = {
    "versions": "SELECT id, branch_id, position, path, blob_id, created_at FROM "
    "workspace_fileversion ORDER BY id",
    "blobs": "SELECT id, session_id, sha256, size, content FROM workspace_workspaceblob "
    "ORDER BY id",
    "fork_marks": "SELECT id, fork_file_mark FROM sessions_app_internalsession ORDER BY id",
    "checkpoint_marks": "SELECT id, files_mark FROM checkpoints_checkpoint ORDER BY id",
    "ledger": "SELECT id, session_id, user_id, branch_ref, turn_ref, message_ref, position, "
    "tool_name, tool_args, tool_result, status, created_at FROM sessions_app_ledgerentry "
    "ORDER BY id",
}


def _sqlite_rows(path: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {name: conn.execute(sql).fetchall() for name, sql in QUERIES.items()}
    finally:
        conn.close()


def _pg_rows(url: str) -> dict[str, list[tuple]]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return {
            name: [tuple(r.values()) for r in conn.execute(sql).fetchall()]  # type: ignore[arg-type]
            for name, sql in QUERIES.items()
        }


def _check_filled(rows: dict[str, list[tuple]]) -> None:
    assert len(rows["versions"]) == 5
    assert len(rows["blobs"]) == 4
    assert any(mark for _, mark in rows["checkpoint_marks"])
    assert any(mark for _, mark in rows["fork_marks"])
    assert len(rows["ledger"]) == 3


def _filled(env: dict[str, str]) -> None:
    """The migrated database of `env` gets WRITE_FILES's session."""
    done = manage(env, "shell", "-c", WRITE_FILES)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(ON_POSTGRES, reason="runs in the SQLite phase of make test")
def test_a_sqlite_backup_holds_the_workspace(tmp_path):
    env = app_env(tmp_path / "var", "http://127.0.0.1:9")
    prebuilt.sqlite_database(tmp_path / "var")
    _filled(env)
    path = tmp_path / "rollback.backup.sqlite3"

    done = manage(env, "backup", str(path))

    assert done.returncode == 0, done.stdout + done.stderr
    source = _sqlite_rows(tmp_path / "var" / "rollback.sqlite3")
    _check_filled(source)
    assert _sqlite_rows(path) == source


@pytest.fixture
def pg_server() -> Iterator[PgServer]:
    server = PgServer()
    try:
        yield server
    finally:
        server.drop_all()


@pytest.mark.postgres
def test_a_postgres_backup_restores_the_workspace(pg_server, tmp_path):
    source = prebuilt.postgres_database(pg_server.server_url, pg_server.name("files"))
    env = app_env(tmp_path / "var", "http://127.0.0.1:9", DATABASE_URL=pg_server.url_of(source))
    _filled(env)
    path = tmp_path / "rollback.dump"
    done = manage(env, "backup", str(path))
    assert done.returncode == 0, done.stdout + done.stderr

    restored = pg_server.name("files_restored")
    created = pg_server.run("createdb", *pg_server.flags, "--template=template0", restored)
    assert created.returncode == 0, created.stderr
    restore = pg_server.run(
        "pg_restore", *pg_server.flags, f"--dbname={restored}", "--no-owner", str(path)
    )
    assert restore.returncode == 0, restore.stderr

    rows = _pg_rows(pg_server.url_of(source))
    _check_filled(rows)
    assert _pg_rows(pg_server.url_of(restored)) == rows
