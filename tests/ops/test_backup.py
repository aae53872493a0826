"""`manage.py backup PATH` (ops.backup) against the served app while turns run, then restored as
docs/operations.md says, into a fresh database: the backup holds the data as it stood at one
moment (nothing torn, nothing that was finished before it began missing), and the app runs on it.
Bad input leaves nothing behind: no file at PATH, no temporary file.

The SQLite tests run in the SQLite phase of `make test`; those marked `postgres` in the
PostgreSQL phase, each on databases of their own (created and dropped here), with pg_dump and
pg_restore from the PATH."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from tests import prebuilt
from tests.procs import Services, app_env, manage

ON_POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres", "postgresql"))
sqlite_phase = pytest.mark.skipif(
    ON_POSTGRES, reason="the SQLite backup tests run in the SQLite phase of make test"
)

# The rows compared between the source and the backup, with the columns a later turn, title or
# checkpoint may still change in the source after the backup's moment (the source goes on
# serving). Those are checked against the backup's own rows instead (see check_structure).
TABLES: dict[str, set[str]] = {
    "sessions_app_externalsession": {"session_name", "updated_at", "metadata", "archived_at"},
    "sessions_app_internalsession": {
        "message_count",
        "session_state",
        "is_current",
        "checkpoint_count",
    },
    "sessions_app_message": set(),  # written once, never updated
    "checkpoints_checkpoint": set(),
    "sessions_app_turn": {
        "status",
        "reply_message_id",
        "tools_used",
        "checkpoint_id",
        "rolled_back_to_id",
        "error",
        "started_at",
        "heartbeat_at",
        "attempts",
        "finished_at",
        "metadata",
    },
}
PREFILL_MESSAGES = 30_000
FILLER = (
    "Backups are taken while the app serves; the copy is one moment of the database, with every "
    "branch whole, every checkpoint inside its branch and the search index in step. "
)
PREFILL = f"""
from accounts.models import User
from sessions_app.models import Branch, Message
from sessions_app.services import session_create
owner = User.objects.create_user("alice")
session = session_create(owner=owner, name="Archive")
branch = Branch.objects.get(session=session, is_current=True)
Message.objects.bulk_create(
    [
        Message(branch=branch, position=i, role="user" if i % 2 == 0 else "assistant",
                content=f"archived message {{i}}: {FILLER * 2}")
        for i in range({PREFILL_MESSAGES})
    ],
    batch_size=2000,
)
Branch.objects.filter(pk=branch.pk).update(message_count={PREFILL_MESSAGES})
"""


# --- The served app and its load ---------------------------------------------------------------


class Load:
    """API clients, each on a thread of its own, running conversations until stopped: a session,
    three turns, a checkpoint, a restore of it as a new branch, a turn there; again. Remembers
    what was finished, and when."""

    def __init__(self, base_url: str, key: str, clients: int = 2) -> None:
        self.base_url = base_url
        self.key = key
        self.clients = clients
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.finished: list[tuple[float, str, int]] = []  # (monotonic time, table, id)
        self.errors: list[str] = []
        self.threads: list[threading.Thread] = []

    def __enter__(self) -> Load:
        for n in range(self.clients):
            thread = threading.Thread(target=self._client, args=(n,), daemon=True)
            thread.start()
            self.threads.append(thread)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(120)

    def turns(self) -> int:
        with self.lock:
            return sum(1 for _, table, _ in self.finished if table == "sessions_app_turn")

    def wait_for_turns(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while self.turns() < count:
            assert not self.errors, self.errors
            assert time.monotonic() < deadline, f"only {self.turns()} turns in {timeout} s"
            time.sleep(0.1)

    def finished_before(self, moment: float) -> dict[str, set[int]]:
        done: dict[str, set[int]] = {table: set() for table in TABLES}
        with self.lock:
            for when, table, pk in self.finished:
                if when < moment:
                    done[table].add(pk)
        return done

    def _done(self, table: str, pk: int) -> None:
        with self.lock:
            self.finished.append((time.monotonic(), table, pk))

    def _client(self, n: int) -> None:
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(base_url=f"{self.base_url}/api/v1", headers=headers, timeout=60) as http:

            def post(path: str, body: dict, expect: int = 201) -> dict:
                response = http.post(path, json=body)
                if response.status_code != expect:
                    raise AssertionError(f"POST {path}: {response.status_code} {response.text}")
                return response.json()

            def turn(session: int, text: str) -> None:
                done = post(f"/sessions/{session}/turns/", {"message": text, "wait": True})
                if done["status"] != "done":
                    raise AssertionError(f"turn {done['id']} is {done['status']}: {done}")
                self._done("sessions_app_turn", done["id"])

            i = 0
            try:
                while not self.stopping.is_set():
                    i += 1
                    session = post("/sessions/", {"name": f"client {n}, conversation {i}"})["id"]
                    self._done("sessions_app_externalsession", session)
                    for k in range(3):
                        turn(session, f"Question {k} of conversation {n}.{i}. {FILLER}")
                    checkpoint = post(f"/sessions/{session}/checkpoints/", {"name": "three"})
                    self._done("checkpoints_checkpoint", checkpoint["id"])
                    restored = post(
                        f"/checkpoints/{checkpoint['id']}/restore/", {"mode": "branch"}, 200
                    )
                    self._done("sessions_app_internalsession", restored["branch"]["id"])
                    turn(session, f"Once more, on the restored branch of {n}.{i}. {FILLER}")
            except Exception as exc:  # reported by the test, which fails on any
                with self.lock:
                    self.errors.append(f"client {n}: {exc!r}")


def serve(env: dict[str, str], log_dir: Path) -> tuple[Services, str, str]:
    """The app migrated, with alice's archive of PREFILL_MESSAGES messages, served by daphne;
    the services, the base URL and an API key of alice's."""
    services = Services(log_dir)
    services.prepare(env)
    _, key = services.setup_with_key(env, PREFILL, "alice")
    return services, services.start_daphne(env), key


# A binary file (not UTF-8: its bytes in WorkspaceBlob.data) put before the backup, which the
# restored app must serve byte for byte.
BINARY = bytes(range(256)) * 4 + b"\x00\xff"


def put_binary_file(base_url: str, key: str) -> int:
    """A session holding BINARY as `blob.bin`: its id."""
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(headers=headers, timeout=30) as http:
        session = http.post(f"{base_url}/api/v1/sessions/", json={"name": "binary"}).json()["id"]
        put = http.put(f"{base_url}/api/v1/sessions/{session}/files/blob.bin", content=BINARY)
        assert put.status_code == 201, put.text
        assert put.json()["binary"] is True
    return session


def backup_under_load(env: dict[str, str], base_url: str, key: str, path: Path):
    """Run `manage.py backup PATH` while two clients run turns; what the clients had finished
    before it started, and its result. The clients go on for a while after it ends."""
    with Load(base_url, key) as load:
        load.wait_for_turns(6)
        started = time.monotonic()
        result = manage(env, "backup", str(path))
        ended = time.monotonic()
        load.wait_for_turns(load.turns() + 4)
    assert not load.errors, load.errors
    assert result.returncode == 0, result.stderr
    # Turns ran on both sides of the backup: it was taken from a database being written.
    times = [when for when, table, _ in load.finished if table == "sessions_app_turn"]
    assert min(times) < started
    assert max(times) > ended
    return load.finished_before(started), result


# --- Reading and comparing databases -----------------------------------------------------------

Tables = dict[str, dict[int, dict]]


def sqlite_tables(path: Path) -> Tables:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return {
            t: {row["id"]: dict(row) for row in conn.execute(f"SELECT * FROM {t}")}  # noqa: S608 - our table names
            for t in TABLES
        }
    finally:
        conn.close()


def postgres_tables(url: str) -> Tables:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return {
            t: {row["id"]: row for row in conn.execute(f"SELECT * FROM {t}").fetchall()}  # noqa: S608 - quoted names and constants; values are parameters
            for t in TABLES
        }


def check_backup(source: Tables, backup: Tables, finished_before: dict[str, set[int]]) -> None:
    """The backup is the source as it stood at one moment: every row it has is the source's
    (the source may have more, written after), with the columns that cannot change since equal;
    everything the clients had finished before the backup began is in it; and it is whole."""
    for table, changing in TABLES.items():
        assert backup[table], f"no rows in {table}"
        extra = set(backup[table]) - set(source[table])
        assert not extra, f"{table}: rows {sorted(extra)[:10]} are not in the source"
        for pk, row in backup[table].items():
            kept = {k: v for k, v in row.items() if k not in changing}
            assert kept == {k: source[table][pk][k] for k in kept}, f"{table} {pk} differs"
        missing = finished_before[table] - set(backup[table])
        assert not missing, f"{table}: {sorted(missing)[:10]} finished before the backup"
    for pk in finished_before["sessions_app_turn"]:
        assert backup["sessions_app_turn"][pk]["status"] == "done"
    assert len(source["sessions_app_message"]) > len(backup["sessions_app_message"])
    check_structure(backup)


def check_structure(db: Tables) -> None:
    """No torn turn: each branch's message_count and checkpoint_count match its rows, its own
    messages are the positions from its fork point up without a gap, each session has one
    current branch, and every finished turn has its reply after its user message."""
    messages: dict[int, dict[int, dict]] = {}
    for m in db["sessions_app_message"].values():
        messages.setdefault(m["branch_id"], {})[m["position"]] = m
    checkpoints: dict[int, list[dict]] = {}
    for c in db["checkpoints_checkpoint"].values():
        checkpoints.setdefault(c["branch_id"], []).append(c)
    current: dict[int, int] = {}
    for b in db["sessions_app_internalsession"].values():
        own = messages.get(b["id"], {})
        assert sorted(own) == list(range(b["fork_position"], b["message_count"])), b
        if b["parent_id"] is not None:
            parent = db["sessions_app_internalsession"][b["parent_id"]]
            assert b["fork_position"] <= parent["message_count"], b
        marks = checkpoints.get(b["id"], [])
        assert b["checkpoint_count"] == len(marks), b
        assert all(b["fork_position"] <= c["message_count"] <= b["message_count"] for c in marks)
        current[b["session_id"]] = current.get(b["session_id"], 0) + bool(b["is_current"])
    assert set(current) == set(db["sessions_app_externalsession"])
    assert set(current.values()) == {1}, "a session without exactly one current branch"
    for turn in db["sessions_app_turn"].values():
        asked = messages[turn["branch_id"]][turn["user_message_position"]]
        # A turn refers to its messages: both are in the backup with it.
        assert (asked["role"], asked["id"]) == ("user", turn["user_message_id"]), turn
        if turn["status"] == "done":
            reply = messages[turn["branch_id"]][turn["user_message_position"] + 1]
            assert (reply["role"], reply["id"]) == ("assistant", turn["reply_message_id"]), turn


def served_messages(base_url: str, key: str, session: int) -> list[tuple[str, str]]:
    """A session's history as the served app gives it: (role, content) per message."""
    headers = {"Authorization": f"Bearer {key}"}
    got: list[tuple[str, str]] = []
    url = f"{base_url}/api/v1/sessions/{session}/messages/?limit=100"
    with httpx.Client(headers=headers, timeout=30) as http:
        while url:
            response = http.get(url)
            assert response.status_code == 200, response.text
            body = response.json()
            got += [(m["role"], m["content"]) for m in body["results"]]
            url = body["next"]
    return got


def history(db: Tables, session: int) -> list[tuple[str, str]]:
    """The current branch's history of a session, read from the rows."""
    branches = db["sessions_app_internalsession"]
    branch = next(b for b in branches.values() if b["session_id"] == session and b["is_current"])
    by_branch: dict[int, dict[int, dict]] = {}
    for m in db["sessions_app_message"].values():
        by_branch.setdefault(m["branch_id"], {})[m["position"]] = m
    out: list[tuple[str, str]] = []
    limit = branch["message_count"]
    while branch is not None:
        own = by_branch.get(branch["id"], {})
        out[:0] = [
            (own[p]["role"], own[p]["content"]) for p in range(branch["fork_position"], limit)
        ]
        limit = branch["fork_position"]
        branch = branches.get(branch["parent_id"]) if branch["parent_id"] else None
    return out


def assert_served_as_backed_up(
    tmp_path: Path, restored_env: dict[str, str], key: str, tables: Tables, binary: int
) -> None:
    """The app served on the restored database shows the backup's histories (of the newest
    settled sessions) and the binary file of session `binary` through the API."""
    services = Services(tmp_path)
    try:
        prebuilt.static_files(Path(restored_env["ROLLBACK_VAR_DIR"]))
        restored_url = services.start_daphne(restored_env)
        for session in settled_sessions(tables)[-3:]:
            assert served_messages(restored_url, key, session) == history(tables, session)
        got = httpx.get(
            f"{restored_url}/api/v1/sessions/{binary}/files/blob.bin",
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert got.status_code == 200, got.text
        assert got.content == BINARY
    finally:
        services.stop_all()


def settled_sessions(db: Tables) -> list[int]:
    """Sessions with no turn in flight in `db`: an app started on it leaves them as they are
    (the recovery job takes up a turn that was running at the backup's moment)."""
    busy = {t["session_id"] for t in db["sessions_app_turn"].values() if t["status"] != "done"}
    return sorted(set(db["sessions_app_externalsession"]) - busy)


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- SQLite ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sqlite_app(model_server, tmp_path_factory) -> Iterator[tuple[dict[str, str], str, str]]:
    tmp = tmp_path_factory.mktemp("backup-sqlite")
    env = app_env(tmp / "var", model_server.base_url, API_THROTTLE_USER="100000/min")
    services = None
    try:
        services, base_url, key = serve(env, tmp)
        yield env, base_url, key
    finally:
        if services is not None:
            services.stop_all()


@sqlite_phase
def test_a_sqlite_backup_taken_while_turns_run_restores_with_the_same_data(
    sqlite_app, model_server, tmp_path
):
    env, base_url, key = sqlite_app
    path = tmp_path / "backups" / "rollback.sqlite3"
    path.parent.mkdir()
    live = Path(env["ROLLBACK_VAR_DIR"]) / "rollback.sqlite3"
    # A connection held open, as a long-lived process holds one, keeps SQLite from copying the
    # WAL into the database file each time the last connection closes: as on a busy server,
    # the newest commits are in the WAL only, and a copy of the file alone would miss them.
    binary = put_binary_file(base_url, key)
    held = sqlite3.connect(live)
    try:
        finished_before, result = backup_under_load(env, base_url, key, path)
    finally:
        held.close()
    print(result.stdout)
    assert f"Backed up to {path}: SQLite database" in result.stdout
    assert listing(path.parent) == ["rollback.sqlite3"]  # no temporary file left

    backup = sqlite3.connect(path)
    assert backup.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert backup.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # one file
    # The search index is in step with the messages (FTS5 raises if it is not).
    backup.execute(
        "INSERT INTO sessions_app_message_fts(sessions_app_message_fts) VALUES ('integrity-check')"
    )
    backup.close()
    check_backup(sqlite_tables(live), sqlite_tables(path), finished_before)

    # Restore as docs/operations.md says, over a stopped app's database (one killed mid-run,
    # its last commits still in its -wal file), then migrate --check, then serve.
    var = tmp_path / "restored"
    var.mkdir()
    database_with_its_wal(var / "rollback.sqlite3")
    steps = subprocess.run(  # noqa: S603 - the test's own argument list, no shell
        ["bash", "-euc", RESTORE_SQLITE],  # noqa: S607 - a tool on PATH, in a test
        env={**os.environ, "VAR": str(var), "BACKUP": str(path)},
        capture_output=True,
        text=True,
    )
    assert steps.returncode == 0, steps.stderr
    assert listing(var / "before-restore") == [f"rollback.sqlite3{s}" for s in ("", "-shm", "-wal")]
    restored_env = app_env(var, model_server.base_url)
    check = manage(restored_env, "migrate", "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    with sqlite3.connect(var / "rollback.sqlite3") as restored:
        assert restored.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    tables = sqlite_tables(var / "rollback.sqlite3")
    assert tables == sqlite_tables(path)
    assert_served_as_backed_up(tmp_path, restored_env, key, tables, binary)


# docs/operations.md, "Restoring SQLite", steps 2 and 3: the var directory in $VAR, the backup
# in $BACKUP.
RESTORE_SQLITE = """
mkdir "$VAR/before-restore"
mv "$VAR"/rollback.sqlite3* "$VAR/before-restore/"
cp "$BACKUP" "$VAR/rollback.sqlite3"
"""


def database_with_its_wal(path: Path) -> None:
    """A database in WAL mode whose last commits are only in its -wal file, as a process killed
    mid-run leaves it. Left beside a restored file, that WAL would be read into it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE sessions_app_message (id INTEGER PRIMARY KEY, content TEXT)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO sessions_app_message (content) VALUES (?)", [(FILLER,)] * 2000)
    conn.execute("COMMIT")
    kept = {s: Path(f"{path}{s}").read_bytes() for s in ("-wal", "-shm")}
    conn.close()  # the last connection to close checkpoints the WAL and deletes it
    for suffix, data in kept.items():
        Path(f"{path}{suffix}").write_bytes(data)


@sqlite_phase
def test_a_missing_directory_is_refused(sqlite_app, tmp_path):
    env, _, _ = sqlite_app
    result = manage(env, "backup", str(tmp_path / "nowhere" / "backup.sqlite3"))
    assert result.returncode != 0
    assert f"The directory {tmp_path / 'nowhere'} does not exist." in result.stderr
    assert listing(tmp_path) == []


@pytest.fixture
def unwritable(tmp_path) -> Iterator[Path]:
    """A directory this process cannot create a file in: read-only by its mode, and, for root
    (whom modes do not stop), immutable (chattr +i)."""
    directory = tmp_path / "locked"
    directory.mkdir()
    directory.chmod(0o555)
    immutable = False
    try:
        (directory / "probe").touch()
    except PermissionError:
        pass
    else:
        (directory / "probe").unlink()
        immutable = subprocess.run(["chattr", "+i", str(directory)], check=False).returncode == 0  # noqa: S603, S607 - a tool on PATH, a list, no shell
        if not immutable:
            pytest.skip("cannot make a directory unwritable for root here (chattr +i)")
    try:
        yield directory
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(directory)], check=True)  # noqa: S603, S607 - a tool on PATH, a list, no shell
        directory.chmod(0o755)


@sqlite_phase
def test_an_unwritable_directory_is_refused(sqlite_app, unwritable):
    env, _, _ = sqlite_app
    result = manage(env, "backup", str(unwritable / "backup.sqlite3"))
    assert result.returncode != 0
    assert f"Cannot write in {unwritable}:" in result.stderr
    assert listing(unwritable) == []


@sqlite_phase
def test_a_directory_as_the_path_is_refused(sqlite_app, tmp_path):
    env, _, _ = sqlite_app
    (tmp_path / "kept").touch()
    result = manage(env, "backup", str(tmp_path))
    assert result.returncode != 0
    assert f"{tmp_path} is a directory" in result.stderr
    assert listing(tmp_path) == ["kept"]


@sqlite_phase
def test_an_existing_file_is_kept_unless_forced(sqlite_app, tmp_path):
    env, _, _ = sqlite_app
    path = tmp_path / "backup.sqlite3"
    path.write_bytes(b"an older backup")
    refused = manage(env, "backup", str(path))
    assert refused.returncode != 0
    assert "exists already: choose another name, or pass --force" in refused.stderr
    assert path.read_bytes() == b"an older backup"
    forced = manage(env, "backup", "--force", str(path))
    assert forced.returncode == 0, forced.stderr
    assert listing(tmp_path) == ["backup.sqlite3"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM sessions_app_message").fetchone()[0] > 0


def _file_size_limit(limit: int) -> Callable[[], None]:
    """For the child process: files cannot grow past `limit` bytes (as on a full disk), and a
    write past it fails with EFBIG instead of killing the process."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@sqlite_phase
def test_a_backup_that_fails_midway_leaves_nothing(sqlite_app, tmp_path):
    env, _, _ = sqlite_app
    live = Path(env["ROLLBACK_VAR_DIR"]) / "rollback.sqlite3"
    assert live.stat().st_size > 4 * 1024 * 1024
    path = tmp_path / "backup.sqlite3"
    result = manage(env, "backup", str(path), preexec_fn=_file_size_limit(1024 * 1024))
    assert result.returncode != 0
    assert "The backup could not be written:" in result.stderr
    assert listing(tmp_path) == []


@sqlite_phase
def test_a_copy_that_fails_the_integrity_check_is_not_kept(sqlite_app, tmp_path):
    env, _, _ = sqlite_app
    live = Path(env["ROLLBACK_VAR_DIR"]) / "rollback.sqlite3"
    damaged = tmp_path / "damaged.sqlite3"
    with sqlite3.connect(live) as source, sqlite3.connect(damaged) as copy:
        source.backup(copy)
        copy.execute("PRAGMA journal_mode=DELETE")
    page = 4096
    with damaged.open("r+b") as f:  # garbage over pages in the middle (the archive's messages)
        f.seek((damaged.stat().st_size // page // 2) * page)
        f.write(os.urandom(page * 8))
    out = tmp_path / "out"
    out.mkdir()
    damaged_env = {**env, "DATABASE_URL": f"sqlite:///{damaged}"}
    result = manage(damaged_env, "backup", str(out / "backup.sqlite3"))
    assert result.returncode != 0
    assert "The copy failed SQLite's integrity check, so it was not kept" in result.stderr
    assert listing(out) == []


# --- PostgreSQL --------------------------------------------------------------------------------


def _with_path(url: str, path: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=path))


class PgServer:
    """The PostgreSQL server of DATABASE_URL, for databases made and dropped by the tests; its
    connection flags as the client programs take them (createdb, pg_restore)."""

    def __init__(self) -> None:
        url = urlsplit(os.environ["DATABASE_URL"])
        self.url = os.environ["DATABASE_URL"]
        self.server_url = _with_path(self.url, "/postgres")
        self.flags = [f"--host={url.hostname}", f"--port={url.port or 5432}"]
        self.flags += [f"--username={url.username}"] if url.username else []
        self.env = {**os.environ, "PGPASSWORD": url.password or ""}
        self.names: list[str] = []

    def name(self, what: str) -> str:
        name = f"rollback_backup_{what}_{uuid.uuid4().hex[:8]}"
        self.names.append(name)
        return name

    def url_of(self, name: str) -> str:
        return _with_path(self.url, f"/{name}")

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=300)  # noqa: S603 - the test's own argument list, no shell

    def drop_all(self) -> None:
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            for name in self.names:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def pg_server() -> Iterator[PgServer]:
    server = PgServer()
    try:
        yield server
    finally:
        server.drop_all()


@pytest.fixture(scope="module")
def pg_app(model_server, tmp_path_factory, pg_server) -> Iterator[tuple[dict[str, str], str, str]]:
    """The app served on a fresh PostgreSQL database (turns on daphne's own threads)."""
    tmp = tmp_path_factory.mktemp("backup-postgres")
    name = prebuilt.postgres_database(pg_server.server_url, pg_server.name("source"))
    env = app_env(
        tmp / "var",
        model_server.base_url,
        DATABASE_URL=pg_server.url_of(name),
        API_THROTTLE_USER="100000/min",
    )
    services = None
    try:
        services, base_url, key = serve(env, tmp)
        yield env, base_url, key
    finally:
        if services is not None:
            services.stop_all()


@pytest.mark.postgres
def test_a_postgres_backup_taken_while_turns_run_restores_with_the_same_data(
    pg_app, pg_server, model_server, tmp_path
):
    env, base_url, key = pg_app
    path = tmp_path / "rollback.dump"
    binary = put_binary_file(base_url, key)
    finished_before, result = backup_under_load(env, base_url, key, path)
    assert f"Backed up to {path}: PostgreSQL dump (custom format)" in result.stdout
    assert listing(tmp_path) == ["rollback.dump"]

    # Restore as docs/operations.md says: createdb, pg_restore, migrate --check.
    name = pg_server.name("restored")
    created = pg_server.run("createdb", *pg_server.flags, "--template=template0", name)
    assert created.returncode == 0, created.stderr
    restore = pg_server.run(
        "pg_restore",
        *pg_server.flags,
        f"--dbname={name}",
        "--no-owner",
        "--exit-on-error",
        str(path),
    )
    assert restore.returncode == 0, restore.stderr
    restored_env = app_env(
        tmp_path / "var", model_server.base_url, DATABASE_URL=pg_server.url_of(name)
    )
    check = manage(restored_env, "migrate", "--check")
    assert check.returncode == 0, check.stdout + check.stderr

    tables = postgres_tables(pg_server.url_of(name))
    check_backup(postgres_tables(env["DATABASE_URL"]), tables, finished_before)
    with psycopg.connect(pg_server.url_of(name)) as conn:  # the search index came back too
        index = conn.execute(
            "SELECT 1 FROM pg_indexes WHERE indexname = 'message_content_search'"
        ).fetchall()
        assert index == [(1,)]
    assert_served_as_backed_up(tmp_path, restored_env, key, tables, binary)


@pytest.mark.postgres
def test_pg_dump_gets_the_password_from_the_environment_only(pg_app, tmp_path):
    """pg_dump (run through a wrapper that records how it was called) has the password in
    PGPASSWORD, never on its command line; the command prints no password either."""
    env, _, _ = pg_app
    secret = "s3cret-" + uuid.uuid4().hex
    url = urlsplit(env["DATABASE_URL"])
    with_password = url._replace(netloc=f"{url.username}:{secret}@{url.hostname}:{url.port}")
    record = tmp_path / "pg_dump-called.json"
    wrapper = tmp_path / "pg_dump"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"json.dump({{'argv': sys.argv, 'password': os.environ.get('PGPASSWORD')}}, "
        f"open({str(record)!r}, 'w'))\n"
        f"os.execv({shutil.which('pg_dump')!r}, ['pg_dump', *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    path = tmp_path / "rollback.dump"
    result = manage(
        {**env, "DATABASE_URL": urlunsplit(with_password)},
        "backup",
        "--pg-dump",
        str(wrapper),
        str(path),
    )
    assert result.returncode == 0, result.stderr
    called = json.loads(record.read_text())
    assert called["password"] == secret
    assert not any(secret in arg for arg in called["argv"])
    assert "--format=custom" in called["argv"]
    assert secret not in result.stdout + result.stderr
    assert path.stat().st_size > 0


@pytest.mark.postgres
def test_a_failing_pg_dump_says_what_to_run_and_leaves_nothing(pg_app, tmp_path):
    env, _, _ = pg_app
    secret = "s3cret-" + uuid.uuid4().hex
    url = urlsplit(env["DATABASE_URL"])
    missing = url._replace(
        netloc=f"{url.username}:{secret}@{url.hostname}:{url.port}", path="/no_such_database"
    )
    path = tmp_path / "rollback.dump"
    result = manage({**env, "DATABASE_URL": urlunsplit(missing)}, "backup", str(path))
    assert result.returncode != 0
    assert "pg_dump failed (exit status 1)" in result.stderr
    assert 'database "no_such_database" does not exist' in result.stderr
    assert "Run by hand:\n  PGPASSWORD=... pg_dump --format=custom" in result.stderr
    assert f"--file={path}" in result.stderr
    assert secret not in result.stdout + result.stderr
    assert listing(tmp_path) == []


@pytest.mark.postgres
def test_a_missing_pg_dump_says_what_to_run(pg_app, tmp_path):
    env, _, _ = pg_app
    path = tmp_path / "rollback.dump"
    result = manage(env, "backup", "--pg-dump", str(tmp_path / "no-pg_dump"), str(path))
    assert result.returncode != 0
    assert f"{tmp_path / 'no-pg_dump'} was not found." in result.stderr
    name = urlsplit(env["DATABASE_URL"]).path.lstrip("/")
    assert f"pg_dump --format=custom --file={path}" in result.stderr
    # The database by name, as a conninfo when libpq options go with it (the connect timeout).
    assert f"--dbname={name}" in result.stderr or f"'--dbname=dbname={name} " in result.stderr
    assert listing(tmp_path) == []
