"""Django's PostgreSQL backend, with a pool that tells an unreachable server from a busy one.

psycopg's pool keeps a request that finds no free connection waiting for its whole timeout
(DATABASE_POOL_TIMEOUT), whether every connection is lent (a burst: waiting is right) or the
server does not answer (an outage: waiting only delays the error, and every request of the site
hangs for half a minute). So a request that finds no free connection first asks the server
itself, with one connection of its own made within its connect_timeout
(DATABASE_CONNECT_TIMEOUT; one such probe at a time per pool, its answer shared for
PROBE_REUSE_SECONDS, named "<application_name>-probe" and closed at once): a server that
answers means the pool is busy, and the request takes its place in the pool's queue as before
(first come, first served); one that does not is an OperationalError at once, which the site
answers with a 503 (core.unavailable). An explicit wait (`getconn(timeout=...)`, the health
check's) is left as asked.

A connection is checked before it is lent (an empty query: a restarted server, a dropped
socket) only when it has sat unused in the pool for CHECK_IDLE_SECONDS or more. psycopg's
check costs a round trip, and the server's CPU, on every borrow: under load a connection goes
back and out again within milliseconds, and about a tenth of a busy web process's samples were
these checks. A connection that failed while lent is broken, and the pool drops it when it
comes back; one that sat idle through an outage is checked, and replaced.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from typing import Any, cast

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

PROBE_REUSE_SECONDS = 1.0
CHECK_IDLE_SECONDS = 1.0

_probe_lock = threading.Lock()
# Per pool (by name): when the last probe ended (time.monotonic), and whether the server answered.
_last_probe: dict[str, tuple[float, bool]] = {}


class Pool(ConnectionPool):
    def getconn(self, timeout: float | None = None) -> psycopg.Connection[Any]:
        empty_handed = timeout is None and not self.get_stats().get("pool_available")
        if empty_handed and not server_answers(self):
            raise psycopg.OperationalError(
                "The database server does not answer (no connection could be made)."
            )
        return super().getconn(timeout)

    def putconn(self, conn: psycopg.Connection[Any]) -> None:
        _returned_at[conn] = time.monotonic()
        super().putconn(conn)


# When each connection lent by a pool of this process last came back.
_returned_at: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = (
    weakref.WeakKeyDictionary()
)


def check_if_idle(conn: psycopg.Connection[Any]) -> None:
    """psycopg's check (an empty query) of a connection about to be lent, when it sat in the
    pool CHECK_IDLE_SECONDS or more (one never lent is new: not checked)."""
    returned = _returned_at.pop(conn, None)
    if returned is not None and time.monotonic() - returned >= CHECK_IDLE_SECONDS:
        Pool.check_connection(conn)


def server_answers(pool: ConnectionPool) -> bool:
    """Whether a new connection to the pool's server can be made (within its connect_timeout)."""
    with _probe_lock:
        at, answered = _last_probe.get(pool.name, (-math.inf, True))
        if time.monotonic() - at < PROBE_REUSE_SECONDS:
            return answered
        kwargs = dict(cast("dict[str, Any]", pool.kwargs))  # as Django gave them
        kwargs["application_name"] = f"{kwargs.get('application_name') or 'rollback'}-probe"
        try:
            with psycopg.Connection.connect(cast(str, pool.conninfo), **kwargs):
                answered = True
        except psycopg.Error:
            answered = False
        _last_probe[pool.name] = (time.monotonic(), answered)
        return answered


def worker_pool_size(pool: str, concurrency: int) -> int:
    """The connections a Celery worker's process needs: with a pool of threads (or green ones),
    its `concurrency` turns run in the one process, each holding a connection except while the
    model answers (agents/turn/stream.py): half of them, plus the heartbeats' and a spare (at
    least 10, the web processes' size). A prefork process runs one turn at a time: its own, the
    heartbeats', and its tools' (4)."""
    if any(kind in pool.lower() for kind in ("thread", "gevent", "eventlet")):
        return max(10, concurrency // 2 + 2)
    return 4


def follow_worker(pool: object, concurrency: object) -> int | None:
    """Size this process's PostgreSQL pool for a Celery worker starting with `pool` (its pool's
    name or class) and `concurrency`, unless DATABASE_POOL_SIZE was set: the size taken, or
    None. Called as the worker starts (rollback_site.celery), before it forks or runs a task."""
    from django.conf import settings
    from django.db import connections

    options = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if settings.DATABASE_POOL_SIZE_SET or not isinstance(options, dict):
        return None
    name = pool if isinstance(pool, str) else f"{getattr(pool, '__module__', '')}"
    threads = concurrency if isinstance(concurrency, int) else (os.cpu_count() or 2)
    size = worker_pool_size(name, threads)
    options["max_size"] = size
    # A pool made before (nothing connects before a worker starts, as a rule) is resized; none
    # is made here, where a prefork worker's parent would hand it to its children.
    pools = connections["default"]._connection_pools  # type: ignore[attr-defined]
    made = cast("Pool | None", pools.get("default"))
    if made is not None and made.max_size != size:
        made.resize(min(made.min_size, size), size)
    return size


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> Pool | None:
        """Django's own (5.2), making a `Pool`. (django-stubs do not know the private names.)"""
        pool_options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == NO_DB_ALIAS or not pool_options:
            return None
        pools = self._connection_pools  # type: ignore[attr-defined]
        if self.alias not in pools:
            if self.settings_dict.get("CONN_MAX_AGE", 0) != 0:
                raise ImproperlyConfigured("Pooling doesn't support persistent connections.")
            if pool_options is True:
                pool_options = {}
            connect_kwargs = self.get_connection_params()
            connect_kwargs["autocommit"] = True  # Django sets it properly later on
            enable_checks = self.settings_dict["CONN_HEALTH_CHECKS"]
            pool = Pool(
                kwargs=connect_kwargs,
                open=False,
                configure=self._configure_connection,  # type: ignore[attr-defined]
                check=check_if_idle if enable_checks else None,
                **pool_options,
            )
            pools.setdefault(self.alias, pool)
        return cast(Pool, pools[self.alias])
