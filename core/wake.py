"""A doorbell per turn, for the code that waits on a turn: `"wait": true` (web.api) waits for its
end or its pause for an approval (a paused turn itself waits on nothing: agents.approval_gate).

`ring` is called by core.events for every event it sends; the events that end a wait (`RINGS`)
ring the doorbell of their turn. `wait_until` waits for one of them, on every topology:

- Without REDIS_URL (the embedded mode: in-memory channel layer, turns on threads of this
  process) whatever ends a turn runs in this process, and rings the waits of this process
  directly (a `threading.Event` each).
- With REDIS_URL the ring is also published on a Redis pub/sub channel of the turn, and a wait
  subscribes to it on a connection of its own, from its own thread, with no event loop. It used
  to receive on the channel layer, on a process-local channel of prefix `wait.`: channels_redis
  reads all of a process's local channels through one receive lock, held by a socket's consumer
  through its blocking read (up to 5 s) of the sockets' own key, so with any socket open in the
  process the wait's read never began before its 1.5 s poll cut it short.

The doorbell is not the record. After each ring, and at least every `poll` seconds in case a
ring is lost (Redis pub/sub delivers at most once), the wait asks `done`, which reads the
database.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import redis
from django.conf import settings

log = logging.getLogger(__name__)

# The events that end a wait: a turn's end, its pause for an approval, and the owner's answer.
RINGS = frozenset(
    {
        "turn.finished",
        "turn.failed",
        "turn.cancelled",
        "tool.approval_requested",
        "tool.approval_answered",
    }
)

# How long a wait lets Redis confirm its subscription before it counts on the poll alone.
SUBSCRIBE_SECONDS = 2.0


class _Waiter:
    def __init__(self, types: frozenset[str]) -> None:
        self.types = types
        self.rung = threading.Event()


_waiters: dict[int, list[_Waiter]] = {}
_waiters_lock = threading.Lock()

_client: tuple[int, str, redis.Redis] | None = None
_client_lock = threading.Lock()


def ring(kind: str, turn: int) -> None:
    """Ring the doorbell of `turn` when `kind` ends a wait, in this process and, with Redis, in
    every process. Called after the change is committed; never fails the caller."""
    if kind not in RINGS:
        return
    with _waiters_lock:
        here = [w for w in _waiters.get(turn, ()) if kind in w.types]
    for waiter in here:
        waiter.rung.set()
    client = _redis()
    if client is None:
        return
    try:
        client.publish(_channel(turn), kind)
    except redis.RedisError:
        log.warning("could not ring turn %s's doorbell (%s) on Redis", turn, kind)


def wait_until(
    *,
    turn: int,
    types: frozenset[str],
    done: Callable[[], bool],
    timeout: float,
    poll: float,
) -> None:
    """Block until `done()` is true or `timeout` seconds pass. `done` is asked at once, again as
    soon as an event of `types` (some of `RINGS`) of `turn` is sent, by this process or any
    other, and at least every `poll` seconds. `done` runs on the calling thread (it reads the
    database)."""
    unknown = types - RINGS
    if unknown:
        raise ValueError(f"no doorbell rings on {sorted(unknown)}: only on {sorted(RINGS)}")
    deadline = time.monotonic() + timeout
    client = _redis()
    if client is None:
        _wait_here(turn, types, done, deadline, poll)
    else:
        _wait_on_redis(client, turn, types, done, deadline, poll)


def _wait_here(
    turn: int, types: frozenset[str], done: Callable[[], bool], deadline: float, poll: float
) -> None:
    with watching(turn, types) as rung:  # before the first check: nothing is missed
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            rung.wait(min(poll, remaining))
            rung.clear()


@contextmanager
def watching(
    turn: int, types: frozenset[str], rung: threading.Event | None = None
) -> Iterator[threading.Event]:
    """An event set whenever this process rings `turn`'s doorbell for one of `types` (the
    caller's `rung`, which something else may set too, or a new one), while the block runs. Only
    this process's rings: a waiter that must hear other processes polls the database as well
    (agents.tool_deadline), or waits with `wait_until`."""
    waiter = _Waiter(types)
    if rung is not None:
        waiter.rung = rung
    with _waiters_lock:
        _waiters.setdefault(turn, []).append(waiter)
    try:
        yield waiter.rung
    finally:
        with _waiters_lock:
            mine = _waiters.get(turn, [])
            if waiter in mine:
                mine.remove(waiter)
            if not mine:
                _waiters.pop(turn, None)


def _wait_on_redis(
    client: redis.Redis,
    turn: int,
    types: frozenset[str],
    done: Callable[[], bool],
    deadline: float,
    poll: float,
) -> None:
    pubsub = client.pubsub()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    try:
        # Subscribed (Redis confirmed it) before the first check: an end committed after that
        # check rings after it too, and is heard.
        listening = _subscribe(pubsub, _channel(turn))
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if not listening:
                _idle(min(poll, remaining))
                continue
            try:
                _next_ring(pubsub, types, time.monotonic() + min(poll, remaining))
            except redis.RedisError:
                log.warning("turn %s: lost its doorbell on Redis; polling", turn)
                listening = False
    finally:
        try:
            pubsub.close()
        except redis.RedisError:
            log.debug("turn %s: closing its doorbell failed", turn, exc_info=True)


def _subscribe(pubsub: redis.client.PubSub, channel: str) -> bool:
    try:
        pubsub.subscribe(channel)
        deadline = time.monotonic() + SUBSCRIBE_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            message = pubsub.get_message(timeout=left)
            if message is not None and message["type"] == "subscribe":
                return True
    except redis.RedisError:
        pass
    log.warning("could not subscribe to %s on Redis; the wait polls", channel)
    return False


def _next_ring(pubsub: redis.client.PubSub, types: frozenset[str], until: float) -> None:
    """Return on a ring of one of `types`, or at `until`."""
    while (left := until - time.monotonic()) > 0:
        message = pubsub.get_message(timeout=left)
        if message is None or message["type"] != "message":
            continue
        data = message["data"]
        kind = data.decode() if isinstance(data, bytes) else str(data)
        if kind in types:
            return


def _idle(seconds: float) -> None:
    """The pause between two polls when no doorbell can be heard."""
    threading.Event().wait(seconds)


def _channel(turn: int) -> str:
    """The pub/sub channel of a turn. Redis pub/sub ignores the database number, so the name
    carries the one of REDIS_URL, which every process of a deployment shares: deployments on
    one Redis (each with a database of its own) never ring each other's waits (a stray ring
    would only cost a read)."""
    client = _redis()
    db = client.connection_pool.connection_kwargs.get("db", 0) if client is not None else 0
    return f"rollback.wake.db{db}.turn.{turn}"


def _redis() -> redis.Redis | None:
    """This process's Redis client (one per process: a forked worker makes its own), or None
    without REDIS_URL."""
    global _client
    url = settings.REDIS_URL
    if not url:
        return None
    with _client_lock:
        if _client is None or _client[:2] != (os.getpid(), url):
            _client = (
                os.getpid(),
                url,
                redis.Redis.from_url(
                    url,
                    socket_timeout=settings.REDIS_COMMAND_TIMEOUT,
                    socket_connect_timeout=settings.REDIS_CONNECT_TIMEOUT,
                ),
            )
        return _client[2]
