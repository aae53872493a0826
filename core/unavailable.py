"""A server the app depends on does not answer: the database (PostgreSQL) or Redis (the cache,
the channel layer, the Celery broker). Such an error is an outage, not a bug in the request, so
every door answers it the same way: 503 with a readable message, never a 500. This module says
which errors those are and what to tell the user; `web.pages.errors.server_error` (pages and
the API, whatever layer raised) and `web.ws.unavailable` (the sockets) are the two places that
answer them.

Each client is bounded so that the error comes within seconds (settings: DATABASE_CONNECT_TIMEOUT,
REDIS_CONNECT_TIMEOUT, REDIS_COMMAND_TIMEOUT), rather than after the 30 s of a pool or a socket.
"""

from __future__ import annotations

import kombu.exceptions
import psycopg
import redis.exceptions
from django.db import InterfaceError, OperationalError

# Django's wrappers of the driver's errors, the driver's own (psycopg_pool's PoolTimeout is one,
# raised outside Django's wrapping), and Redis's; kombu's for the Celery broker.
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    psycopg.OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    kombu.exceptions.OperationalError,
)

MESSAGE = (
    "Rollback is unavailable for a moment: its database or its cache does not answer. "
    "Nothing you saved is lost; try again in a minute."
)
# Seconds a client should wait before trying again (the Retry-After header).
RETRY_AFTER = 30


def is_unavailable(error: BaseException | None) -> bool:
    """Whether `error`, or an error it was raised from or while handling, says a server the app
    depends on does not answer."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, UNAVAILABLE_ERRORS):
            return True
        seen.add(id(error))
        if error.__cause__ is not None:
            error = error.__cause__
        else:
            error = None if error.__suppress_context__ else error.__context__
    return False
