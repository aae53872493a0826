"""One summariser per branch: a hold in the cache (Redis with REDIS_URL, so across processes)
that a turn needing a summary waits on, and a note that one is on its way (agents.summaries)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.core.cache import cache

SUMMARISING_SECONDS = 300  # a summariser's claim on a branch, renewed at each piece
SUMMARISING_POLL = 0.2  # how often a turn looks whether the branch's summariser has finished


def _summarising_key(branch_id: int) -> str:
    return f"rollback:context:summarising:{branch_id}"


def _queued_key(branch_id: int) -> str:
    return f"rollback:context:summary-queued:{branch_id}"


@dataclass
class Claim:
    """A summariser's hold on a branch (in the cache: Redis with REDIS_URL, so across
    processes), for SUMMARISING_SECONDS, renewed at each piece it summarises."""

    key: str
    token: str

    def renewing(self, stop: Callable[[], bool]) -> Callable[[], bool]:
        def check() -> bool:
            cache.touch(self.key, SUMMARISING_SECONDS)
            return stop()

        return check


@contextmanager
def summarising(
    branch_id: int, *, wait: bool, stop: Callable[[], bool] = lambda: False
) -> Iterator[Claim | None]:
    """Hold the branch's summarising while the block runs: None when another summariser
    holds it. With `wait`, wait for it first (a turn), while `stop` allows and at most
    SUMMARISING_SECONDS: then the block runs without the hold (a summary of the same prefix
    is stored once, sessions_app.services.summary_store)."""
    key = _summarising_key(branch_id)
    token = uuid.uuid4().hex
    claimed = bool(cache.add(key, token, SUMMARISING_SECONDS))
    deadline = time.monotonic() + SUMMARISING_SECONDS
    while not claimed and wait and not stop() and time.monotonic() < deadline:
        time.sleep(SUMMARISING_POLL)
        claimed = bool(cache.add(key, token, SUMMARISING_SECONDS))
    try:
        yield Claim(key, token) if claimed else None
    finally:
        if claimed and cache.get(key) == token:
            cache.delete(key)


def summary_queued(branch_id: int, queued: bool) -> None:
    """Note (or clear) that a summariser for the branch is on its way (agents.summaries)."""
    if queued:
        cache.set(_queued_key(branch_id), 1, timeout=SUMMARISING_SECONDS)
    else:
        cache.delete(_queued_key(branch_id))


def is_summarising(branch_id: int) -> bool:
    """Whether the branch's history is being summarised, or is about to be."""
    found = cache.get_many([_summarising_key(branch_id), _queued_key(branch_id)])
    return bool(found)
