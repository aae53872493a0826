"""Where state is kept: the database (SQLite by default, or PostgreSQL), Redis for the channel
layer and the cache, and /healthz's checks of them."""

from __future__ import annotations

from typing import Any

import dj_database_url

from rollback_site.settings.core import VAR_DIR
from rollback_site.settings.env import env

# --- Database -------------------------------------------------------------------------------
# SQLite by default. WAL lets readers run beside the writer, the busy timeout makes a writer wait
# for the lock instead of failing, and IMMEDIATE transactions take the write lock up front so
# two transactions never deadlock upgrading a read lock ("database is locked").
SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": (
        "PRAGMA journal_mode=WAL;"
        "PRAGMA synchronous=NORMAL;"
        "PRAGMA foreign_keys=ON;"
        "PRAGMA busy_timeout=20000;"
    ),
}

DATABASE_URL = env.DATABASE_URL
# PostgreSQL: each process keeps a bounded pool of connections (psycopg's pool, Django 5.1+).
# Under ASGI every request runs on a thread of its own, so persistent per-thread connections
# (CONN_MAX_AGE) pile up with the threads; with the pool a request borrows a connection and gives
# it back when it ends, and a burst waits up to DATABASE_POOL_TIMEOUT seconds for a free one
# instead of opening more. A process never holds more than DATABASE_POOL_SIZE connections (and,
# when a request finds none free, one probe connection, closed at once: core.postgres).
# A server that does not answer is told apart from a busy pool (core.postgres): a connection is
# made within DATABASE_CONNECT_TIMEOUT seconds (libpq's connect_timeout, at least 2) or the
# server counts as unreachable, and the request is a 503 within a few seconds, not a 500 after
# DATABASE_POOL_TIMEOUT.
DATABASE_POOL_SIZE = env.DATABASE_POOL_SIZE or 10
# Unless set, a Celery worker sizes its pool by its concurrency as it starts
# (core.postgres.follow_worker): a pool of threads runs that many turns in one process.
DATABASE_POOL_SIZE_SET = env.DATABASE_POOL_SIZE is not None
# The served process answers HTTP on at most this many threads, each kept for the process's life
# with its database connections (rollback_site.http_handler): SQLite's are kept open for the
# thread (CONN_MAX_AGE None; a broken one is closed at the request's end), PostgreSQL's are lent
# by the pool for each request. A thread is started only when no other is free, so a quiet
# process has a few. A request that waits on a turn ("wait": true) holds one for up to
# API_TURN_WAIT_SECONDS (without its database connection): the bound is high so that waits
# never hold up the pages. At most this many requests of one process run at once; more queue.
HTTP_THREADS = env.HTTP_THREADS
DATABASE_POOL_TIMEOUT = env.DATABASE_POOL_TIMEOUT
DATABASE_CONNECT_TIMEOUT = env.DATABASE_CONNECT_TIMEOUT
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        DATABASES["default"]["OPTIONS"] = dict(SQLITE_OPTIONS)
        DATABASES["default"]["CONN_MAX_AGE"] = None
    else:
        if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
            DATABASES["default"]["ENGINE"] = "core.postgres"  # its pool: see core/postgres
        DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = DATABASE_CONNECT_TIMEOUT
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": 1,
            "max_size": DATABASE_POOL_SIZE,
            "timeout": DATABASE_POOL_TIMEOUT,
            # Idle connections above min_size are closed after 5 minutes.
            "max_idle": 300,
        }
        # A connection that sat idle is checked before it is lent (a restarted server, a dropped
        # socket): core.postgres.
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "rollback.sqlite3"),  # as a str, like the DATABASE_URL branch
            "OPTIONS": dict(SQLITE_OPTIONS),
            # A connection is kept for its thread's life (SQLite's cost ~1 ms to open, with
            # the pragmas); Django closes one that broke at the request's end.
            "CONN_MAX_AGE": None,
        }
    }
# The embedded mode's turns (no broker: agents.dispatch) run at most this many at once in the
# web process. On PostgreSQL a running turn holds one of the process's pooled connections (the
# heartbeats of all its turns share one more): a quarter of the pool (at least 2), so that the
# HTTP threads and the sockets keep most of it.
_POOLED = DATABASES["default"]["ENGINE"] == "core.postgres"
TURN_THREADS = env.TURN_THREADS or (max(2, DATABASE_POOL_SIZE // 4) if _POOLED else 16)

# --- Redis: channel layer and cache (the Celery broker: workers.py) ---------------------------
REDIS_URL = env.REDIS_URL
# The channel layer waits for a socket's next event with a blocking Redis read of
# channels_redis's `brpop_timeout` (5 s). The Redis client's own read timeout must be longer, or
# an idle socket dies with "Timeout reading from ..." (redis-py 8 made 5 s its default): so it is
# set here, whatever the client's default. Keepalive notices a dead Redis on an idle connection.
REDIS_SOCKET_TIMEOUT = env.REDIS_SOCKET_TIMEOUT
# Every other use of Redis gives up within seconds when it does not answer, so a request is a 503
# (core.unavailable) rather than a wait: a connection is made within REDIS_CONNECT_TIMEOUT, and a
# command of the cache or the broker is answered within REDIS_COMMAND_TIMEOUT (the sockets'
# handshake bounds its channel layer calls by it too, see web/ws/consumers.py).
REDIS_CONNECT_TIMEOUT = env.REDIS_CONNECT_TIMEOUT
REDIS_COMMAND_TIMEOUT = env.REDIS_COMMAND_TIMEOUT
# Messages a channel may hold before the layer drops new ones (channels' default: 100). With
# Redis, the capacity is checked against ONE inbox per web process, which all its sockets share:
# 100 sockets each streaming a reply (a piece every 20 ms) queue some 5,000 messages a second, so
# a process that falls a few seconds behind needs room for tens of thousands. A drop loses
# nothing a reader needs (each socket reads what it missed back from the stream's store and the
# database within ROLLBACK_WS_CATCH_UP_SECONDS), but it is a WARNING, counted in /healthz
# (core.channel_layers). Messages expire after the layer's 60 s in any case.
CHANNEL_LAYER_CAPACITY = env.CHANNEL_LAYER_CAPACITY
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "core.channel_layers.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": REDIS_SOCKET_TIMEOUT,
                        "socket_connect_timeout": REDIS_CONNECT_TIMEOUT,
                        "socket_keepalive": True,
                        "health_check_interval": 15,
                    }
                ],
                "capacity": CHANNEL_LAYER_CAPACITY,
            },
        }
    }
    CACHES: dict[str, dict[str, Any]] = {
        "default": {
            "BACKEND": "core.cache.SharedRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "rollback",
            "OPTIONS": {
                "socket_connect_timeout": REDIS_CONNECT_TIMEOUT,
                "socket_timeout": REDIS_COMMAND_TIMEOUT,
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "core.channel_layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": CHANNEL_LAYER_CAPACITY},
        }
    }
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- Health (/healthz, ops.health) -------------------------------------------------------------
# /healthz checks the database, the cache and, with Celery (REDIS_URL set), that a worker and beat
# are alive. Each check of the database or Redis gives up after HEALTH_CHECK_TIMEOUT seconds, so
# the answer comes within a few seconds even when a server is down or hangs (the pool alone would
# wait DATABASE_POOL_TIMEOUT for a connection, redis-py 5 s to connect and 5 s for an answer).
# A worker records a heartbeat in the cache every HEALTH_HEARTBEAT_SECONDS (from a thread of its
# own, so a long turn does not stop it); beat records one as it wakes, which django-celery-beat's
# scheduler does at least every 5 s. A worker (any one) or beat silent for more than
# HEALTH_WORKER_MAX_AGE or HEALTH_BEAT_MAX_AGE seconds counts as down: several missed beats, so a
# Redis failover or a slow write is no false alarm, and a dead worker shows within half a minute.
# Beat's age is longer: a wake can wait on the database and the broker, and a missing beat only
# delays the recovery of turns. Worker, beat and web clocks must agree (NTP). An age that could
# never pass stops the start (env.py).
HEALTH_CHECK_TIMEOUT = env.HEALTH_CHECK_TIMEOUT
HEALTH_HEARTBEAT_SECONDS = env.HEALTH_HEARTBEAT_SECONDS
HEALTH_WORKER_MAX_AGE = env.HEALTH_WORKER_MAX_AGE
HEALTH_BEAT_MAX_AGE = env.HEALTH_BEAT_MAX_AGE
# The health check's own client of the cache: the same store and keys (in memory: the same
# LOCATION, so the same store), with short timeouts on Redis.
CACHES["health"] = {
    **CACHES["default"],
    "OPTIONS": (
        {"socket_connect_timeout": HEALTH_CHECK_TIMEOUT, "socket_timeout": HEALTH_CHECK_TIMEOUT}
        if REDIS_URL
        else {}
    ),
}
