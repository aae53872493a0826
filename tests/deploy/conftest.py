"""The scaled-out deployment, as the README runs it: daphne processes, Celery workers and beat on
one PostgreSQL database and one Redis, the model behind a real Chat Completions server.

These tests run in the PostgreSQL/Redis phase of `make test` only, each module's one after another
in one worker (its xdist group, tests/conftest.py), beside other modules in other workers. Each
module gets a database of its own on the test server (created and dropped here) and the Redis
database of the worker running it (`tests.procs.stack_redis_url`), flushed before and after.
Clients speak HTTP and WebSocket to the served processes exactly as an integration does
(`Authorization: Bearer <key>`).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
import redis

from tests import prebuilt
from tests.procs import Services, app_env, free_port, stack_redis_url


def _with_path(url: str, path: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=path))


class Database:
    """A database of its own on the PostgreSQL server of DATABASE_URL, migrated: a copy of the
    run's migrated template (tests.prebuilt), which `Stack.prepare` then leaves as it is."""

    def __init__(self) -> None:
        self.name = f"rollback_deploy_{uuid.uuid4().hex[:10]}"
        self.server_url = _with_path(os.environ["DATABASE_URL"], "/postgres")
        self.url = _with_path(os.environ["DATABASE_URL"], f"/{self.name}")

    def __enter__(self) -> Database:
        prebuilt.postgres_database(self.server_url, self.name)
        return self

    def __exit__(self, *exc_info: object) -> None:
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def query(self, sql: str, *params: object) -> list[tuple]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    def connections(self, application_name: str) -> int:
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                "AND application_name = %s",
                (self.name, application_name),
            ).fetchone()
        return int(row[0]) if row else 0


@contextmanager
def running(tmp_path_factory, name: str, env: dict[str, str]) -> Iterator[Stack]:
    """A module's stack: a Stack of `env` (its logs in a temporary directory named after
    `name`), its var directory prepared; every process started on it is stopped at the end."""
    stack = Stack(tmp_path_factory.mktemp(f"{name}-logs"), env)
    try:
        stack.prepare(env)
        yield stack
    finally:
        stack.stop_all()


class Stack(Services):
    """daphne processes, Celery workers and beat, all with the same environment."""

    def __init__(self, log_dir: Path, env: dict[str, str]) -> None:
        super().__init__(log_dir)
        self.env = env
        self.urls: dict[str, str] = {}

    def web(self, name: str) -> str:
        self.urls[name] = self.start_daphne(self.env, name=name)
        return self.urls[name]

    def listening(self, name: str, env: dict[str, str]) -> str:
        """daphne in `env`, once it listens: it may not answer a page (in production it
        redirects to HTTPS, and with a server down it may fail), unlike `web`'s."""
        port = free_port()
        cmd = [sys.executable, "-m", "rollback_site.serve", "-b", "127.0.0.1", "-p", str(port)]
        proc = self.start(name, cmd, env)
        self.wait_for_log(name, "Listening on TCP address", proc)
        return f"http://127.0.0.1:{port}"

    def worker(self, name: str, pool: str = "solo", concurrency: int = 1) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "celery", "-A", "rollback_site", "worker", f"--pool={pool}"]
        cmd += [f"--concurrency={concurrency}", "--loglevel=INFO", "-n", f"{name}@%h"]
        proc = self.start(name, cmd, self.env)
        self.wait_for_log(name, " ready.", proc)
        return proc

    def beat(self) -> subprocess.Popen:
        schedule = str(self.log_dir / "beat-schedule")
        cmd = [sys.executable, "-m", "celery", "-A", "rollback_site", "beat", "-s", schedule]
        proc = self.start("beat", [*cmd, "--loglevel=INFO"], self.env)
        self.wait_for_log("beat", "beat: Starting", proc)
        return proc

    def wait_for_log(self, name: str, text: str, proc: subprocess.Popen, timeout=60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}")
            if text in self.output(name):
                return
            time.sleep(0.1)
        raise RuntimeError(f"{name} did not log {text!r} within {timeout} s")

    def api_key(self, username: str, password: str | None = None) -> str:
        """A user (made here, with `password` if one is given) and a new API key of theirs."""
        make = f"User.objects.create_user({username!r}, password={password!r})"
        _, key = self.setup_with_key(
            self.env, f"from accounts.models import User; {make}", username
        )
        return key


def deploy_env(var_dir: Path, model_url: str, database_url: str, **extra: str) -> dict[str, str]:
    env = app_env(
        var_dir,
        model_url,
        DATABASE_URL=database_url,
        REDIS_URL=stack_redis_url(),
        DJANGO_SECRET_KEY="deploy-tests-secret-key-" + "x" * 30,
    )
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def database() -> Iterator[Database]:
    with Database() as db:
        yield db


@pytest.fixture(scope="module")
def fresh_redis() -> Iterator[None]:
    client = redis.Redis.from_url(stack_redis_url())
    client.flushdb()
    yield
    client.flushdb()
    client.close()


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Not the suite's per-test FLUSHDB (tests/conftest.py): this process's cache is the stack's
    Redis database, which holds the served processes' heartbeats, Celery's queues and channel
    groups while the module runs. Flushed between two tests, /healthz found beat's heartbeat
    gone until beat's next wake (up to 5 s)."""
    return


@pytest.fixture(autouse=True)
def _logs_on_failure(request):
    """When a test fails, the tail of every served process's log is added to its report."""
    yield
    report = getattr(request.node, "rep_call", None)
    stack = request.node.funcargs.get("stack")
    if report is not None and report.failed and isinstance(stack, Services):
        for title, text in stack.tail(80):
            report.sections.append((title, text))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.rep_call = report


class Client:
    """An integration: the REST API and the event stream, with a bearer key."""

    def __init__(self, base_url: str, key: str) -> None:
        self.base_url = base_url
        self.key = key
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60
        )

    def post(self, path: str, body: dict | None = None, expect: int = 201) -> dict:
        response = self.http.post(f"/api/v1{path}", json=body or {})
        assert response.status_code == expect, (response.status_code, response.text)
        return response.json()

    def get(self, path: str) -> dict:
        response = self.http.get(f"/api/v1{path}")
        assert response.status_code == 200, (response.status_code, response.text)
        return response.json()

    def ws_url(self, session_id: int) -> str:
        return self.base_url.replace("http://", "ws://") + f"/ws/v1/sessions/{session_id}/"

    def close(self) -> None:
        self.http.close()


async def listen(
    client: Client,
    session_id: int,
    events: list[dict],
    until,
    deadline: float,
    opened: threading.Event | None = None,
):
    """Collect the session's events into `events` until `until(events)` holds or the deadline
    passes. Returns how the socket ended: "done", "timeout", or the close code and reason when
    the server closed it. `opened` is set once the socket is open: the server accepts it once it
    has joined the session's groups, so an event published from then on reaches it."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    async with connect(
        client.ws_url(session_id),
        additional_headers={"Authorization": f"Bearer {client.key}"},
        open_timeout=20,
        ping_interval=20,
    ) as ws:
        if opened is not None:
            opened.set()
        while not until(events):
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            try:
                frame = await asyncio.wait_for(ws.recv(), timeout=left)
            except TimeoutError:
                return "timeout"
            except ConnectionClosed as exc:
                return f"closed {exc.rcvd.code if exc.rcvd else None} {exc}"
            events.append(json.loads(frame))
        return "done"


def finished(turn_id: int):
    """`until` for `listen`: the turn's turn.finished or turn.failed has arrived."""

    def check(events: list[dict]) -> bool:
        return any(
            e.get("turn") == turn_id and e["type"] in ("turn.finished", "turn.failed")
            for e in events
        )

    return check


def of_turn(events: list[dict], turn_id: int) -> list[dict]:
    return [e for e in events if e.get("turn") == turn_id]
