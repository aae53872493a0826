"""Counters of attempts in the cache, for the limits on signing in and signing up
(accounts.limits) and on Telegram link codes (integrations.telegram.link_limits).

A counter is kept per subject (a username, a client's network, a chat) and starts with the first
attempt; it lives for the limit's window. An attempt takes a place *before* any work, with one
atomic `incr`, and is refused when no place is left: so fifty attempts arriving at once cannot all
pass a check made before any of them was counted. The limit lifts when the window ends.

The counters need a cache whose `incr` is atomic: locmem (counts per process) or Redis (shared by
every process; set REDIS_URL when several processes serve the site).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass

from django.core.cache import cache


@dataclass(frozen=True)
class Counter:
    key: str
    limit: int  # 0: no limit
    seconds: int

    def take(self) -> bool:
        """Take a place; False, taking none, when every place is taken."""
        if self.limit <= 0:
            return True
        cache.add(f"{self.key}:since", time.time(), self.seconds)
        cache.add(self.key, 0, self.seconds)
        try:
            count = cache.incr(self.key)
        except ValueError:  # the window ended between add and incr: a new one starts
            cache.add(self.key, 0, self.seconds)
            count = cache.incr(self.key)
        if count == 1:
            # Redis' incr of a key that expired just after Django's existence check makes a key
            # that never expires; the first place taken sets the window's end again.
            cache.touch(self.key, self.seconds)
        if count > self.limit:
            self.give_back()
            return False
        return True

    def give_back(self) -> None:
        if self.limit <= 0:
            return
        try:
            if cache.decr(self.key) < 0:  # the window ended meanwhile
                cache.delete(self.key)
        except ValueError:  # the window ended: nothing to give back
            pass

    def clear(self) -> None:
        cache.delete_many([self.key, f"{self.key}:since"])

    def retry_after(self) -> int:
        """Seconds until the window ends."""
        since = cache.get(f"{self.key}:since")
        if not isinstance(since, float):
            return self.seconds
        return max(1, min(self.seconds, math.ceil(since + self.seconds - time.time())))


def counter(kind: str, subject: str, *, limit: int, seconds: int) -> Counter:
    """The counter of `kind` for `subject` (stored under a digest of it, never the subject)."""
    digest = hashlib.sha256(subject.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return Counter(key=f"limits:{kind}:{digest}", limit=limit, seconds=max(1, seconds))
