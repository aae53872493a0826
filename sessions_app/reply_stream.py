"""The stream of a running turn's reply: one place that holds it, numbered piece by piece.

The worker running a turn (`ReplyStream`) buffers the model's tokens and, at most every
FLUSH_SECONDS (or at once when FLUSH_CHARS wait, before a tool's events and at the end; less often
while publishing is slow, up to MAX_FLUSH_SECONDS), appends what it buffered to the turn
attempt's stream as one piece, then publishes that piece as `message.delta` with its number
(`seq`, from 1 for each attempt). The pieces due on a timer are sent by the process's flusher
thread, those of every stream due at the same moment together (one store round trip, one
hand-off to the channel layer). The piece is stored BEFORE it is published, so whoever hears
piece n can read pieces 1..n from the store:
- with Redis (REDIS_URL), a Redis list per turn attempt (`seq` is its length after the push),
  kept STREAM_TTL_SECONDS after its last piece, and STREAM_ENDED_TTL_SECONDS once the turn ended;
- without (the embedded mode: the worker runs in the web process), a dict in this process.

A socket that connects mid-turn sends the reply so far (`stream_read`), then the pieces it hears;
one that hears a piece with a gap before it (the channel layer dropped some) reads the missing
range here, at once. A page render shows the reply so far the same way. Nothing is lost: a piece
is never dropped, under overload the stream only slows down (the worker waits for the store).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Protocol

import redis
from django.conf import settings

from core import events

log = logging.getLogger(__name__)

# At most one piece per FLUSH_SECONDS per turn (a few per 50 ms), or sooner when this many
# characters wait.
FLUSH_SECONDS = 0.02
FLUSH_CHARS = 2000
# A publisher that falls behind (the store or the channel layer slow under load) coalesces more:
# after a piece that took longer than FLUSH_SECONDS to store and publish, the next waits as long
# as that one took, up to this, so the stream's pieces grow larger and fewer instead of holding
# the model's tokens back one publish at a time. (Below the 250 ms a reader may wait between
# pieces under load: the benchmark's gap target.)
MAX_FLUSH_SECONDS = 0.2
# How long a turn attempt's stream is kept after its last piece (a turn ends well before: a worker
# that stops writing has died, and the turn is taken over under a new attempt, with a key of its
# own), and once the turn ended (a page rendered just before the end may still ask).
STREAM_TTL_SECONDS = 3600
STREAM_ENDED_TTL_SECONDS = 120


@dataclass(frozen=True)
class Snapshot:
    """The reply so far: its text and the number of its last piece (0: nothing yet)."""

    text: str
    seq: int


NOTHING = Snapshot(text="", seq=0)


def stream_key(*, turn_id: int, attempt: int) -> str:
    return f"rollback:turn-stream:{turn_id}:{attempt}"


class Store(Protocol):
    def append(self, key: str, piece: str) -> int: ...
    def append_many(self, items: list[tuple[str, str]]) -> list[int]: ...
    def read(self, key: str, after: int) -> list[str]: ...
    def end(self, key: str) -> None: ...
    def reset(self, key: str) -> None: ...


class MemoryStore:
    """The embedded mode's store: lists in this process, dropped some time after they end."""

    def __init__(self) -> None:
        self._lists: dict[str, list[str]] = {}
        self._expires: dict[str, float] = {}
        self._lock = threading.Lock()

    def append(self, key: str, piece: str) -> int:
        with self._lock:
            self._expire()
            pieces = self._lists.setdefault(key, [])
            pieces.append(piece)
            self._expires[key] = time.monotonic() + STREAM_TTL_SECONDS
            return len(pieces)

    def append_many(self, items: list[tuple[str, str]]) -> list[int]:
        return [self.append(key, piece) for key, piece in items]

    def read(self, key: str, after: int) -> list[str]:
        with self._lock:
            return list(self._lists.get(key, ())[after:])

    def end(self, key: str) -> None:
        with self._lock:
            if key in self._lists:
                self._expires[key] = time.monotonic() + STREAM_ENDED_TTL_SECONDS

    def reset(self, key: str) -> None:
        with self._lock:
            self._lists.pop(key, None)
            self._expires.pop(key, None)

    def _expire(self) -> None:
        now = time.monotonic()
        for key in [k for k, at in self._expires.items() if at < now]:
            self._lists.pop(key, None)
            self._expires.pop(key, None)


class RedisStore:
    """A Redis list per turn attempt; one round trip per piece (push and expiry together), or
    per batch of pieces of several streams."""

    def __init__(self, url: str) -> None:
        self._client = redis.Redis.from_url(
            url,
            socket_timeout=settings.REDIS_COMMAND_TIMEOUT,
            socket_connect_timeout=settings.REDIS_CONNECT_TIMEOUT,
        )

    def append(self, key: str, piece: str) -> int:
        return self.append_many([(key, piece)])[0]

    def append_many(self, items: list[tuple[str, str]]) -> list[int]:
        """Each piece pushed and its list's expiry renewed, all in one round trip."""
        pipe = self._client.pipeline(transaction=True)
        for key, piece in items:
            pipe.rpush(key, piece.encode())
            pipe.expire(key, STREAM_TTL_SECONDS)
        return [int(length) for length in pipe.execute()[::2]]

    def read(self, key: str, after: int) -> list[str]:
        found = self._client.lrange(key, after, -1)
        return [p.decode() if isinstance(p, bytes) else str(p) for p in found]

    def end(self, key: str) -> None:
        self._client.expire(key, STREAM_ENDED_TTL_SECONDS)

    def reset(self, key: str) -> None:
        self._client.delete(key)


_store: tuple[int, str, Store] | None = None
_store_lock = threading.Lock()


def store() -> Store:
    """This process's store (made again in a forked process, or when REDIS_URL changed)."""
    global _store
    url = settings.REDIS_URL
    with _store_lock:
        if _store is None or _store[0] != os.getpid() or _store[1] != url:
            made: Store = RedisStore(url) if url else MemoryStore()
            _store = (os.getpid(), url, made)
        return _store[2]


def stream_read(*, turn_id: int, attempt: int, after: int = 0) -> list[str]:
    """The pieces of a turn attempt after number `after` (piece `after + 1` first)."""
    return store().read(stream_key(turn_id=turn_id, attempt=attempt), after)


def stream_reset(*, turn_id: int, attempt: int) -> None:
    """Start a turn attempt's stream empty (a database whose ids start again, as a test's, may
    meet a stream left from before), so that a stop before its first piece keeps nothing.
    Never fails: a store away for a moment leaves it as it is."""
    try:
        store().reset(stream_key(turn_id=turn_id, attempt=attempt))
    except redis.RedisError:
        log.warning("could not clear the stream of turn %s", turn_id, exc_info=True)


def stream_snapshot(*, turn_id: int, attempt: int) -> Snapshot:
    """The reply so far of a turn attempt. Never fails: a store away for a moment shows nothing
    (the pieces that follow still come, and a gap is read again)."""
    try:
        pieces = stream_read(turn_id=turn_id, attempt=attempt)
    except redis.RedisError:
        log.warning("could not read the stream of turn %s", turn_id, exc_info=True)
        return NOTHING
    return Snapshot(text="".join(pieces), seq=len(pieces))


class ReplyStream:
    """The worker's side, for one attempt of a turn: `add` each token, `flush` before a tool's
    events; leaving the `with` block flushes the rest. The text kept is bounded by
    AGENT_MAX_REPLY_CHARS (plus room for the note that says a reply was cut there)."""

    def __init__(self, *, session_id: int, turn_id: int, attempt: int) -> None:
        self.session_id, self.turn_id, self.attempt = session_id, turn_id, attempt
        self.key = stream_key(turn_id=turn_id, attempt=attempt)
        self.limit = settings.AGENT_MAX_REPLY_CHARS + 200
        self.seq = 0
        self._length = 0
        self._buffer: list[str] = []
        self._buffered = 0
        self._flushed_at = -FLUSH_SECONDS
        self._interval = FLUSH_SECONDS  # grows while publishing is slow (MAX_FLUSH_SECONDS)
        self._lock = threading.Lock()

    def __enter__(self) -> ReplyStream:
        # An attempt's stream starts empty (a database whose ids start again, as a test's, may
        # meet a stream left from before).
        try:
            store().reset(self.key)
        except redis.RedisError:
            log.warning("%s: could not clear the stream", self.key, exc_info=True)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _flusher.forget(self)
        self.flush()
        try:
            store().end(self.key)
        except redis.RedisError:
            log.warning("%s: could not shorten the stream's lifetime", self.key, exc_info=True)

    def add(self, text: str) -> None:
        """Buffer one streamed piece of text; it goes out within FLUSH_SECONDS (or as long as
        the last piece took to go out, when publishing is slow: MAX_FLUSH_SECONDS). The first
        piece goes out at once, and so does a buffer of FLUSH_CHARS; the rest go out with the
        process's flusher, which sends the pieces of every stream due at the same time together
        (one store round trip and one hand-off to the channel layer for them all)."""
        with self._lock:
            room = self.limit - self._length
            if room <= 0 or not text:
                return
            piece = text[:room]
            self._length += len(piece)
            self._buffer.append(piece)
            self._buffered += len(piece)
            due = self._flushed_at + self._interval
            if self._buffered >= FLUSH_CHARS or (self.seq == 0 and time.monotonic() >= due):
                _send_locked([self])
                return
        _flusher.schedule(self, due)

    def flush(self) -> None:
        """Store and publish what is buffered, as one piece."""
        with self._lock:
            _send_locked([self])


def _send_locked(streams: list[ReplyStream]) -> None:
    """Store what each stream buffered as one piece, then publish the pieces: the streams'
    locks held (one piece of a stream at a time, in order). A publisher that falls behind
    coalesces more: after pieces that took longer than FLUSH_SECONDS to store and publish, the
    next wait as long as they took (up to MAX_FLUSH_SECONDS)."""
    due = [stream for stream in streams if stream._buffer]
    if not due:
        return
    pieces = []
    for stream in due:
        pieces.append("".join(stream._buffer))
        stream._buffer, stream._buffered = [], 0
    started = time.monotonic()
    seqs = _append(due, pieces)
    deltas = [
        events.delta_event(
            session=stream.session_id,
            turn=stream.turn_id,
            delta=piece,
            seq=seq,
            attempt=stream.attempt,
        )
        for stream, piece, seq in zip(due, pieces, seqs, strict=True)
    ]
    events.message_deltas(deltas)
    # Counted from when the pieces went out: the next wait at least as long as these took.
    done = time.monotonic()
    interval = min(MAX_FLUSH_SECONDS, max(FLUSH_SECONDS, done - started))
    for stream, seq in zip(due, seqs, strict=True):
        stream.seq, stream._flushed_at, stream._interval = seq, done, interval


def _append(streams: list[ReplyStream], pieces: list[str]) -> list[int]:
    """Store the pieces, one per stream, in one round trip; their numbers. A store that fails
    is tried again (a stream slows down, never drops a piece), at most for REDIS_COMMAND_TIMEOUT
    more, then the pieces go out unstored."""
    deadline = time.monotonic() + settings.REDIS_COMMAND_TIMEOUT
    items = [(stream.key, piece) for stream, piece in zip(streams, pieces, strict=True)]
    while True:
        try:
            return store().append_many(items)
        except redis.RedisError:
            if time.monotonic() > deadline:
                log.warning("could not store %d pieces", len(items), exc_info=True)
                return [stream.seq + 1 for stream in streams]
            time.sleep(0.05)


class _Flusher:
    """One thread per process sends the buffered pieces of every stream that is due (the
    model's next token came within FLUSH_SECONDS of its last piece, or the model paused after a
    token): no thread per turn, no piece waits past its due time, and the pieces of the streams
    due at the same time go out together."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, int, ReplyStream]] = []
        self._scheduled: set[int] = set()
        self._order = itertools.count()  # ties of the heap, never compared further
        self._cond = threading.Condition()
        self._thread: tuple[int, threading.Thread] | None = None

    def schedule(self, stream: ReplyStream, due: float) -> None:
        with self._cond:
            if id(stream) in self._scheduled:
                return
            self._scheduled.add(id(stream))
            heapq.heappush(self._due, (due, next(self._order), id(stream), stream))
            self._ensure_thread()
            self._cond.notify()

    def forget(self, stream: ReplyStream) -> None:
        with self._cond:
            self._scheduled.discard(id(stream))

    def _ensure_thread(self) -> None:
        if self._thread is None or self._thread[0] != os.getpid():
            thread = threading.Thread(target=self._run, name="rollback-stream-flush", daemon=True)
            self._thread = (os.getpid(), thread)
            thread.start()

    def _next(self) -> list[ReplyStream]:
        """Every stream due now (at least one), waiting for the first."""
        with self._cond:
            while True:
                now = time.monotonic()
                ready = []
                while self._due and self._due[0][0] <= now:
                    _, _, key, stream = heapq.heappop(self._due)
                    if key in self._scheduled:
                        self._scheduled.discard(key)
                        ready.append(stream)
                if ready:
                    return ready
                self._cond.wait(self._due[0][0] - now if self._due else None)

    def _run(self) -> None:
        while True:
            streams = self._next()
            try:
                with contextlib.ExitStack() as held:
                    for stream in streams:
                        held.enter_context(stream._lock)
                    _send_locked(streams)
            except Exception:
                log.exception("could not flush %d streams", len(streams))


_flusher = _Flusher()
