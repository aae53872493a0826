"""The partial reply of a running turn: what has streamed so far, kept outside the message table.

The worker running a turn numbers each streamed piece (`seq`, from 1 for each attempt) and keeps
the text so far in Django's cache under the turn's attempt, as `{"text", "seq"}`, at most every
PARTIAL_WRITE_SECONDS and once more at the end. Every render of a running turn (the page, its
refresh, a socket that connects mid-turn) shows that text with its `seq`, and the page ignores the
pieces it already has (`seq` not above the one shown), so a reload, a second tab or a re-render
loses nothing and doubles nothing. The reply's own message is stored when the turn ends.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from core import logs

from .models import Turn

log = logging.getLogger(__name__)

# How often, at most, the worker writes the text so far to the cache.
PARTIAL_WRITE_SECONDS = 0.3
# How long a partial reply is kept after its last write (a turn ends well before: a worker that
# stops writing has died, and the turn is taken over under a new attempt, with a key of its own).
PARTIAL_TTL_SECONDS = 3600
# How long it is kept once the turn ended (a page rendered just before the end may still ask).
PARTIAL_ENDED_TTL_SECONDS = 120


@dataclass(frozen=True)
class Partial:
    text: str
    seq: int


NOTHING = Partial(text="", seq=0)


def partial_key(*, turn_id: int, attempt: int) -> str:
    return f"turn-partial:{turn_id}:{attempt}"


def partial_get(*, turn: Turn) -> Partial:
    """What the running attempt of `turn` has streamed so far (nothing yet: empty, seq 0)."""
    value = cache.get(partial_key(turn_id=turn.pk, attempt=turn.attempts))
    if not isinstance(value, dict):
        return NOTHING
    text, seq = value.get("text"), value.get("seq")
    if not isinstance(text, str) or not isinstance(seq, int):
        return NOTHING
    return Partial(text=text, seq=seq)


class PartialReply:
    """The worker's side: the text so far in memory, numbered piece by piece, and written to the
    cache by a thread of its own at most every PARTIAL_WRITE_SECONDS (so a socket or page never
    sees text older than that), and at the end. The text kept is bounded by
    AGENT_MAX_REPLY_CHARS (plus the note that says a reply was cut there)."""

    def __init__(self, turn: Turn) -> None:
        self.key = partial_key(turn_id=turn.pk, attempt=turn.attempts)
        self.limit = settings.AGENT_MAX_REPLY_CHARS + 200
        self.seq = 0
        self._parts: list[str] = []
        self._length = 0
        self._lock = threading.Lock()
        self._dirty = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PartialReply:
        self._thread = threading.Thread(
            target=logs.in_this_context(self._run), name=f"{self.key}-writer", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self._write(PARTIAL_ENDED_TTL_SECONDS)

    def _write(self, ttl: int) -> None:
        try:
            self._store(ttl)
        except Exception:  # the cache is away for a moment: the next write catches up
            log.warning("%s: could not write the partial reply", self.key, exc_info=True)

    def add(self, delta: str) -> int:
        """Keep one streamed piece; returns its number."""
        with self._lock:
            self.seq += 1
            room = self.limit - self._length
            if room > 0 and delta:
                piece = delta[:room]
                self._parts.append(piece)
                self._length += len(piece)
            self._dirty = True
            return self.seq

    @property
    def text(self) -> str:
        with self._lock:
            return "".join(self._parts)

    def _store(self, ttl: int) -> None:
        with self._lock:
            text = "".join(self._parts)
            self._parts = [text] if text else []
            value = {"text": text, "seq": self.seq}
            self._dirty = False
        cache.set(self.key, value, ttl)

    def _run(self) -> None:
        last = 0.0
        while not self._stop.wait(PARTIAL_WRITE_SECONDS / 3):
            if self._dirty and time.monotonic() - last >= PARTIAL_WRITE_SECONDS:
                self._write(PARTIAL_TTL_SECONDS)
                last = time.monotonic()
