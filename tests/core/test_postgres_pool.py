"""core.postgres: a request that finds the pool empty waits its turn while the server answers
(a busy pool), and fails at once, not after DATABASE_POOL_TIMEOUT, when it does not; a
connection is checked before it is lent only when it sat idle."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from django.db import connection

from core.postgres.base import Pool, check_if_idle, follow_worker, worker_pool_size
from tests.procs import free_port

pytestmark = pytest.mark.postgres


def _pool(check: Callable[[Any], None] | None = None, **kwargs: object) -> Pool:
    return Pool(
        kwargs={"connect_timeout": 2, "autocommit": True, **kwargs},
        min_size=1,
        max_size=1,
        timeout=30,
        open=True,
        reconnect_timeout=5,
        check=check,
    )


def _test_server() -> dict[str, object]:
    """The test database's server, as a pool's connection arguments."""
    params = connection.get_connection_params()
    return {k: params[k] for k in ("host", "port", "user", "dbname") if params.get(k)}


@pytest.mark.django_db
def test_a_busy_pool_makes_the_request_wait_for_a_connection():
    pool = _pool(**_test_server())
    try:
        held = pool.getconn()  # the pool's one connection is lent: the pool is busy
        returned = threading.Timer(2.0, pool.putconn, args=[held])
        returned.start()
        conn = pool.getconn()  # no error: the server answers, so it waited for its turn
        returned.join()
        try:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            pool.putconn(conn)
    finally:
        pool.close()


@pytest.mark.parametrize("how", ["refused", "hung"])
def test_a_server_that_does_not_answer_is_an_error_rather_than_a_wait(how, silent_port):
    port = free_port() if how == "refused" else silent_port
    pool = _pool(host="127.0.0.1", port=port, user="rollback", dbname="x")
    try:
        with pytest.raises(psycopg.OperationalError, match="does not answer"):
            pool.getconn()
    finally:
        pool.close()


def _checked_pool() -> Pool:
    return _pool(check=check_if_idle, **_test_server())


@pytest.mark.django_db
def test_a_connection_lent_again_at_once_is_not_checked_and_one_left_idle_is(monkeypatch, tmp_path):
    monkeypatch.setattr("core.postgres.base.CHECK_IDLE_SECONDS", 0.5)
    pool = _checked_pool()
    trace = tmp_path / "libpq.trace"
    try:
        conn = pool.getconn()
        with trace.open("w") as out:
            conn.pgconn.trace(out.fileno())  # what the client sends and gets, per message
            pool.putconn(conn)
            conn = pool.getconn()  # back a moment ago: no round trip before it is lent
            checks_at_once = trace.read_text().count('Query\t ""')
            pool.putconn(conn)
            time.sleep(0.6)
            conn = pool.getconn()  # idle for longer: psycopg's check, an empty query
            checks_after_idle = trace.read_text().count('Query\t ""')
            conn.pgconn.untrace()
        pool.putconn(conn)
    finally:
        pool.close()
    assert (checks_at_once, checks_after_idle) == (0, 1)


@pytest.mark.django_db
def test_a_connection_that_died_while_idle_is_replaced_before_it_is_lent(monkeypatch):
    monkeypatch.setattr("core.postgres.base.CHECK_IDLE_SECONDS", 0.2)
    pool = _checked_pool()
    try:
        conn = pool.getconn()
        pid = conn.info.backend_pid
        pool.putconn(conn)
        with connection.cursor() as cursor:  # the server ends it (a restart, a failover)
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        time.sleep(0.3)
        conn = pool.getconn()
        try:
            assert conn.info.backend_pid != pid
            assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            pool.putconn(conn)
    finally:
        pool.close()


def test_a_worker_sizes_its_pool_by_its_concurrency(settings):
    assert worker_pool_size("threads", 50) == 27  # half of 50 turns, the heartbeats, a spare
    assert worker_pool_size("celery.concurrency.thread", 8) == 10  # never below the default
    assert worker_pool_size("prefork", 8) == 4  # each process runs one turn at a time
    assert worker_pool_size("solo", 1) == 4
    options = settings.DATABASES["default"]["OPTIONS"]["pool"]
    made = connection.pool
    before = (options["max_size"], made.min_size, made.max_size)
    try:
        assert follow_worker("threads", 50) == 27
        assert (options["max_size"], connection.pool.max_size) == (27, 27)
        settings.DATABASE_POOL_SIZE_SET = True  # the operator's own size is kept
        assert follow_worker("threads", 100) is None
        assert connection.pool.max_size == 27
    finally:
        options["max_size"] = before[0]
        made.resize(before[1], before[2])
