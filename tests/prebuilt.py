"""What every served stack starts from, built once per test run instead of once per stack: a
migrated SQLite database, the collected static files and a migrated PostgreSQL database to copy.

Each is made as a stack made it before, by the real `manage.py migrate` and `manage.py
collectstatic --noinput` in a process of their own; only the copying is new. A process of the
app costs ~2 s of CPU to start, `migrate` runs every migration from scratch, and `collectstatic`
compresses every file (WhiteNoise's CompressedManifestStaticFilesStorage): some 11 s of CPU a
stack, dozens of times a run. The tests whose subject is `migrate` or `collectstatic` themselves (a
fresh checkout's start, the restores' `migrate --check`) still run them.

The SQLite database and the static files are kept in a directory shared by the pytest-xdist
workers of one run (the run's base temporary directory, which pytest removes a few runs later);
the first worker that needs one builds it under a file lock while the others wait for it. The
PostgreSQL template lives on the server, named after the migrations it holds, so later runs (and
other checkouts with the same migrations) use it too; a lock of the server's (an advisory lock)
keeps two processes from building it at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

from tests.procs import app_env, manage_ok

# Set by tests/conftest.py (_prebuilt_directory) before any test runs.
_directory: Path | None = None
# What this process has built or found already: path or template name, by kind.
_known: dict[str, Path | str] = {}
# No model is asked anything while migrating or collecting.
NO_MODEL = "http://127.0.0.1:9/v1"


def configure(basetemp: Path) -> None:
    """Keep the builds in the run's base temporary directory: under xdist each worker's
    `basetemp` is a directory of its own inside the run's, which is shared."""
    global _directory
    shared = basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp
    _directory = shared / "prebuilt"
    _directory.mkdir(exist_ok=True)


def _shared() -> Path:
    if _directory is None:
        raise RuntimeError("tests.prebuilt.configure was not called (tests/conftest.py calls it)")
    return _directory


def _built(kind: str, build: Callable[[Path], None]) -> Path:
    """The directory `build` filled, once for the whole run: the first process to get here
    builds it under a lock, the others wait for the lock and find it done."""
    if kind in _known:
        return Path(_known[kind])
    target = _shared() / kind
    done = _shared() / f"{kind}.done"
    with (_shared() / f"{kind}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(target, ignore_errors=True)  # what a build that failed left
            build(target)
            done.touch()
    _known[kind] = target
    return target


def _migrate_sqlite(target: Path) -> None:
    env = app_env(target, NO_MODEL)
    manage_ok(env, "migrate", "--noinput")
    # Everything in the database file itself, so the file alone is a whole copy (SQLite
    # removes the emptied WAL when the last connection closes).
    conn = sqlite3.connect(target / "rollback.sqlite3")
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    if (target / "rollback.sqlite3-wal").exists():
        raise RuntimeError(f"the migrated database in {target} kept its WAL")


def _collect_static(target: Path) -> None:
    manage_ok(app_env(target, NO_MODEL), "collectstatic", "--noinput", "-v0")


def sqlite_database(var_dir: Path) -> None:
    """`var_dir` gets the SQLite database that `manage.py migrate` makes (a copy of this run's
    migrated one), as if it had run there. The directory has no database yet."""
    path = var_dir / "rollback.sqlite3"
    if path.exists():
        raise RuntimeError(f"{path} exists: a migrated copy would replace its data")
    var_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_built("sqlite", _migrate_sqlite) / "rollback.sqlite3", path)


def static_files(var_dir: Path) -> None:
    """`var_dir` gets the static files `manage.py collectstatic` collects, as a link to this
    run's: every stack serves the same files, and none writes there (a served process collects
    only when they are out of date: when a source file is edited during the run)."""
    static_root = var_dir / "staticfiles"  # STATIC_ROOT (rollback_site/settings/core.py)
    collected = _built("static", _collect_static) / "staticfiles"
    var_dir.mkdir(parents=True, exist_ok=True)
    if static_root.is_symlink():
        return
    if static_root.exists():
        # A process of the app started on this directory made it (the settings do), empty:
        # rmdir fails if anything was collected into it.
        static_root.rmdir()
    static_root.symlink_to(collected, target_is_directory=True)


# --- PostgreSQL ---------------------------------------------------------------------------------


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def migrations_hash() -> str:
    """A digest of every migration of every installed app (Django's own and the libraries'
    included) and of Django's version, which writes their SQL: another digest, another schema."""
    import django
    from django.apps import apps

    digest = hashlib.sha256(django.get_version().encode())
    for app in sorted(apps.get_app_configs(), key=lambda a: a.label):
        for path in sorted(Path(app.path).glob("migrations/*.py")):
            digest.update(f"{app.label}/{path.name}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def postgres_template(server_url: str) -> str:
    """The name of a database on the server of `server_url` (a URL of its maintenance database,
    /postgres) that `manage.py migrate` migrated, made if missing, to copy with CREATE DATABASE
    ... TEMPLATE. It takes no connection (ALLOW_CONNECTIONS false): PostgreSQL copies a
    database only while nobody is connected to it."""
    if "postgres" in _known:
        return str(_known["postgres"])
    name = f"rollback_tpl_{migrations_hash()}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        # Held until this connection closes: one process builds, the others wait and find it.
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (name,))
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            _known["postgres"] = name
            return name
        # Made under another name and renamed once migrated: a build that fails midway leaves
        # no template that looks whole (the next build drops what it left).
        building = f"{name}_building"
        conn.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{building}"')
        env = app_env(_shared() / "postgres-var", NO_MODEL)
        env["DATABASE_URL"] = _with_database(server_url, building)
        manage_ok(env, "migrate", "--noinput")
        conn.execute(f'ALTER DATABASE "{building}" WITH ALLOW_CONNECTIONS false')
        conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
    _known["postgres"] = name
    return name


def postgres_database(server_url: str, name: str = "") -> str:
    """A new database on the server of `server_url`, as `manage.py migrate` leaves an empty one
    (a copy of the migrated template); its name (`name`, or one made up)."""
    name = name or f"rollback_test_{uuid.uuid4().hex[:10]}"
    template = postgres_template(server_url)
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name
