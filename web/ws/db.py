"""The sockets' database work (a handshake's lookups, an access check, a turn's progress, an
event's fragment rendered for a page), on a pool of threads of their own, `rollback-ws-db`.

Channels' `database_sync_to_async` runs every call on asgiref's one thread for synchronous code
(thread_sensitive): with a hundred sockets streaming, every socket's read queued behind every
other's on that one lane, and a PostgreSQL round trip held them all. Here up to `THREADS` calls
run at once; each still closes its thread's stale connections before and after it runs, as
Channels' does (a PostgreSQL connection goes back to the process's pool after each call; SQLite
keeps one per thread). A call in a test's transaction is not seen from these threads: socket
tests use transactional databases, as the served process has no such transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar, cast

from channels.db import DatabaseSyncToAsync

THREAD_NAME = "rollback-ws-db"
# Calls at once per process: more than one socket's read in flight while another waits on the
# database, few enough to stay well within a PostgreSQL pool (DATABASE_POOL_SIZE) shared with the
# HTTP threads and the turns.
THREADS = 8

P = ParamSpec("P")
R = TypeVar("R")

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def pool() -> ThreadPoolExecutor:
    """The process's pool for the sockets' database work."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix=THREAD_NAME)
        return _pool


def socket_db(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`fn` to await from a consumer: run on the sockets' pool, its thread's database
    connections looked after before and after it."""
    return cast(
        "Callable[P, Awaitable[R]]",
        DatabaseSyncToAsync(fn, thread_sensitive=False, executor=pool()),
    )
