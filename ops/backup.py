"""A backup of the database while the app serves: `manage.py backup PATH`.

- SQLite: SQLite's online backup API copies the live file into a temporary file beside PATH, in
  one step. The source runs in WAL mode, so that step reads one snapshot (a read transaction) while
  daphne and the workers go on writing to the WAL; they are never blocked. A stepped copy
  (`pages=N`) would be no better and can be much worse: it gives the snapshot up between steps,
  and any commit by another connection restarts it from the first page, so under a steady stream
  of turns it never ends (measured: with a commit every 10 ms, a 48 MB file restarted 4,781 times
  in 52 s without finishing, while the one-step copy took 0.1 s and writers waited at most 17 ms).
  The copy is switched to a single file (journal mode DELETE) and checked with
  `PRAGMA integrity_check` before it is renamed onto PATH.
- PostgreSQL: `pg_dump --format=custom` of DATABASES["default"] (one snapshot: consistent while
  turns run) into a temporary file beside PATH, then renamed. The password goes in PGPASSWORD,
  never on the command line or in a message; when pg_dump is missing or fails, the error says
  what to run by hand.

Either way PATH is either the whole, checked backup or absent: the temporary file is written,
flushed to disk (fsync) and renamed in one step, and removed when anything fails.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.request import pathname2url

from django.db import connections

from core.errors import DomainError

# libpq connection parameters from DATABASES["default"]["OPTIONS"] that pg_dump needs too (a
# URL's ?sslmode=require ends up there); the rest of OPTIONS is Django's or psycopg's own.
# (sslpassword is left out: it would show on pg_dump's command line; use a service file.)
LIBPQ_OPTIONS = {
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslcrl",
    "connect_timeout",
    "options",
    "service",
    "passfile",
    "target_session_attrs",
    "gssencmode",
    "channel_binding",
    "application_name",
}


class BackupError(DomainError):
    """A backup that was not made; nothing was left at its path."""


@dataclass(frozen=True)
class Backup:
    path: Path
    engine: str  # "sqlite" or "postgresql"
    size: int  # bytes
    seconds: float


def backup_create(
    *, path: str | os.PathLike[str], force: bool = False, pg_dump: str = ""
) -> Backup:
    """Back the default database up to `path`: a SQLite file, or a pg_dump archive in the custom
    format. An existing file at `path` is replaced only with `force`. `pg_dump` names the program
    (default: the one on PATH)."""
    started = time.monotonic()
    conn = connections["default"]
    dest = _destination(Path(path).expanduser(), force=force)
    if conn.vendor == "sqlite":
        source = _sqlite_source(str(conn.settings_dict["NAME"]), dest)
        with _staged(dest, force=force) as temp:
            _sqlite_copy(source, temp)
        engine = "sqlite"
    elif conn.vendor == "postgresql":
        with _staged(dest, force=force) as temp:
            _pg_dump(conn.settings_dict, temp, dest, program=pg_dump)
        engine = "postgresql"
    else:
        raise BackupError(f"Backups of a {conn.vendor} database are not supported.")
    return Backup(dest, engine, dest.stat().st_size, time.monotonic() - started)


def _destination(dest: Path, *, force: bool) -> Path:
    """The absolute path to write, or a BackupError saying why it cannot be written there."""
    dest = Path(os.path.abspath(dest))
    if dest.is_dir():
        raise BackupError(
            f"{dest} is a directory: give the backup's file name, such as {dest}/rollback.backup."
        )
    if not dest.parent.is_dir():
        raise BackupError(f"The directory {dest.parent} does not exist.")
    if os.path.lexists(dest) and not force:
        raise BackupError(
            f"{dest} exists already: choose another name, or pass --force to replace it."
        )
    return dest


@contextlib.contextmanager
def _staged(dest: Path, *, force: bool) -> Iterator[Path]:
    """A temporary file in the destination's directory, renamed onto `dest` once the block has
    filled it and it is on disk; removed (with any SQLite journal beside it) when anything fails."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
    except OSError as exc:
        raise BackupError(f"Cannot write in {dest.parent}: {exc.strerror or exc}.") from None
    os.close(fd)
    temp = Path(name)
    try:
        yield temp
        _fsync(temp)
        _place(temp, dest, force=force)
        _fsync(dest.parent)
    except BaseException:
        for leftover in (temp, *(Path(f"{temp}{s}") for s in ("-journal", "-wal", "-shm"))):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        raise


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _place(temp: Path, dest: Path, *, force: bool) -> None:
    """Rename the finished file onto `dest` in one step. Without `force` a file that appeared at
    `dest` meanwhile is not replaced: a hard link fails when the name is taken."""
    try:
        if force:
            os.replace(temp, dest)
            return
        try:
            os.link(temp, dest)
        except FileExistsError:
            raise BackupError(
                f"{dest} exists already: choose another name, or pass --force to replace it."
            ) from None
        except OSError:  # a file system without hard links: check, then rename
            if os.path.lexists(dest):
                raise BackupError(f"{dest} exists already.") from None
            os.replace(temp, dest)
        else:
            temp.unlink()
    except OSError as exc:
        raise BackupError(f"Cannot write {dest}: {exc.strerror or exc}.") from None


# --- SQLite ------------------------------------------------------------------------------------


def _sqlite_source(name: str, dest: Path) -> Path:
    if not name or name == ":memory:" or "mode=memory" in name:
        raise BackupError("The database is in memory: there is no file to back up.")
    source = Path(os.path.abspath(name))
    if not source.is_file():
        raise BackupError(f"The SQLite database {source} does not exist.")
    # Replacing the live database (or its journal) under the running app would destroy it.
    if dest in {source, *(Path(f"{source}{s}") for s in ("-wal", "-shm", "-journal"))}:
        raise BackupError(f"{dest} is the live database (or its journal): back it up elsewhere.")
    return source


def _sqlite_copy(source: Path, temp: Path) -> None:
    # mode=rw: never create an empty database where the live one should be.
    uri = f"file:{pathname2url(str(source))}?mode=rw"
    try:
        src = sqlite3.connect(uri, uri=True, timeout=20)
    except sqlite3.Error as exc:
        raise BackupError(f"Cannot open the SQLite database {source}: {exc}.") from None
    try:
        dst = sqlite3.connect(temp)
        try:
            # One step: one consistent snapshot of the source (see the module's docstring).
            src.backup(dst, pages=-1)
            # The copy carries the source's WAL flag; make it one self-contained file.
            dst.execute("PRAGMA journal_mode=DELETE").fetchall()
            problems = _integrity_problems(dst)
        finally:
            dst.close()
    except sqlite3.Error as exc:
        raise BackupError(f"The backup could not be written: {exc}.") from None
    finally:
        src.close()
    if problems:
        raise BackupError(
            "The copy failed SQLite's integrity check, so it was not kept: "
            + "; ".join(problems[:5])
            + f". Check the live database: sqlite3 {source} 'PRAGMA integrity_check'"
        )


def _integrity_problems(conn: sqlite3.Connection) -> list[str]:
    """What `PRAGMA integrity_check` finds wrong (nothing: an empty list)."""
    try:
        found = [str(row[0]) for row in conn.execute("PRAGMA integrity_check").fetchall()]
    except sqlite3.DatabaseError as exc:  # damage bad enough to stop the check itself
        return [str(exc)]
    return [] if found == ["ok"] else found


# --- PostgreSQL --------------------------------------------------------------------------------


def pg_dump_command(db: dict[str, Any], file: Path | str, program: str = "pg_dump") -> list[str]:
    """pg_dump's command line for the database `db` (a DATABASES entry), without the password:
    that goes in the PGPASSWORD environment variable."""
    argv = [program, "--format=custom", f"--file={file}"]
    for flag, key in (("--host", "HOST"), ("--port", "PORT"), ("--username", "USER")):
        if db.get(key):
            argv.append(f"{flag}={db[key]}")
    options = {
        key: value
        for key, value in (db.get("OPTIONS") or {}).items()
        if key in LIBPQ_OPTIONS and value not in (None, "")
    }
    if options:  # a connection string carries what has no flag of its own (sslmode, ...)
        from psycopg.conninfo import make_conninfo

        argv.append(f"--dbname={make_conninfo(dbname=db['NAME'], **options)}")
    else:
        argv.append(f"--dbname={db['NAME']}")
    return argv


def _pg_dump(db: dict[str, Any], temp: Path, dest: Path, *, program: str) -> None:
    by_hand = shlex.join(pg_dump_command(db, dest))
    if db.get("PASSWORD"):
        by_hand = f"PGPASSWORD=... {by_hand}"
    found = shutil.which(program or "pg_dump")
    if found is None:
        raise BackupError(
            f"{program or 'pg_dump'} was not found. Install PostgreSQL's client programs, of the "
            "server's major version or newer (or name one with --pg-dump), or run by hand:\n  "
            + by_hand
        )
    env = dict(os.environ)
    password = str(db.get("PASSWORD") or "")
    if password:
        env["PGPASSWORD"] = password
    argv = [*pg_dump_command(db, temp, found), "--no-password"]  # never wait for a prompt
    try:
        result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)  # noqa: S603 - a list, no shell
    except OSError as exc:
        raise BackupError(f"{found} could not run: {exc}. Run by hand:\n  {by_hand}") from None
    if result.returncode != 0:
        said = result.stderr.strip() or result.stdout.strip() or "(no message)"
        if password:
            said = said.replace(password, "***")
        hint = ""
        if "version mismatch" in said:
            hint = (
                "\npg_dump must be of the server's major version or newer: install that "
                "one, or name it with --pg-dump."
            )
        raise BackupError(
            f"pg_dump failed (exit status {result.returncode}):\n{said[-2000:]}{hint}\n"
            f"Run by hand:\n  {by_hand}"
        )
