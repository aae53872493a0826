"""core.postgres: a request that finds the pool empty waits its turn while the server answers
(a busy pool), and fails at once, not after DATABASE_POOL_TIMEOUT, when it does not."""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import connection

from core.postgres.base import Pool
from tests.procs import free_port

pytestmark = pytest.mark.postgres


def _pool(**kwargs: object) -> Pool:
    return Pool(
        kwargs={"connect_timeout": 2, "autocommit": True, **kwargs},
        min_size=1,
        max_size=1,
        timeout=30,
        open=True,
        reconnect_timeout=5,
    )


@pytest.mark.django_db
def test_a_busy_pool_makes_the_request_wait_for_a_connection():
    params = connection.get_connection_params()
    pool = _pool(**{k: params[k] for k in ("host", "port", "user", "dbname") if params.get(k)})
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
