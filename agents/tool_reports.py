"""Each process's abandoned tool calls (agents.tool_deadline), told to `/healthz` through the
cache: a Celery worker runs its turns in processes of its own (a prefork worker's children), not
in the web process that answers `/healthz` (ops.health reads them back: `reported`).

A process that holds abandoned calls takes one of SLOTS cache entries (`cache.add`, the first
free one) and writes its count there at once and every HEALTH_HEARTBEAT_SECONDS while it holds
any, from a thread of its own; the entry lives HEALTH_WORKER_MAX_AGE, so a process killed with
calls abandoned drops out of the sum within that time. Once its count is back to 0 it writes the
0 and frees its entry. A cache that does not answer costs a logged warning, never the call."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypedDict, cast

from django.conf import settings
from django.core.cache import caches

log = logging.getLogger(__name__)

CACHE_ALIAS = "health"  # short timeouts on Redis (rollback_site.settings.stores)
SLOTS = 64
KEY = "agents:tools:abandoned:{}"


class Reported(TypedDict):
    node: str  # host:pid
    abandoned: int
    max_abandoned: int
    at: float  # time.time()


def this_node() -> str:
    """This process, as its entry names it: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Reporter:
    """This process's entry: `changed()` after each abandon and each release."""

    def __init__(self, count: Callable[[], int]) -> None:
        self.count = count
        self.slot: int | None = None
        self.pid = os.getpid()
        self._lock = threading.Lock()
        # One write at a time (the reporting thread's, a release's): one entry per process.
        self._writing = threading.Lock()
        self._thread: threading.Thread | None = None

    def changed(self) -> None:
        with self._lock:
            if self.pid != os.getpid():  # a forked child: nothing of its parent's is its own
                self.pid, self.slot, self._thread = os.getpid(), None, None
            if self._thread is None and self.count() > 0:
                self._thread = threading.Thread(
                    target=self._beat, name="rollback-tool-report", daemon=True
                )
                self._thread.start()
                return
        self._write()

    def _beat(self) -> None:
        while True:
            held = self._write()
            if not held:
                with self._lock:
                    if self.count() == 0:
                        self._thread = None
                        return
            time.sleep(settings.HEALTH_HEARTBEAT_SECONDS)

    def _write(self) -> int:
        """Write this process's count (freeing its entry at 0); the count written."""
        with self._writing:
            return self._write_now()

    def _write_now(self) -> int:
        count = self.count()
        cache = caches[CACHE_ALIAS]
        entry: Reported = {
            "node": this_node(),
            "abandoned": count,
            "max_abandoned": int(settings.AGENT_TOOL_MAX_ABANDONED),
            "at": time.time(),
        }
        ttl = settings.HEALTH_WORKER_MAX_AGE
        try:
            if count == 0:
                if self.slot is not None:
                    cache.delete(KEY.format(self.slot))
                    self.slot = None
                return 0
            if self.slot is not None and _owner(cache.get(KEY.format(self.slot))) == entry["node"]:
                cache.set(KEY.format(self.slot), entry, timeout=ttl)
                return count
            free = (i for i in range(SLOTS) if cache.add(KEY.format(i), entry, ttl))
            self.slot = next(free, None)
            if self.slot is None:
                log.warning("%s processes report abandoned tool calls: this one is not", SLOTS)
        except Exception:
            log.warning("could not report this process's abandoned tool calls", exc_info=True)
        return count


def _owner(entry: Any) -> str | None:
    return entry.get("node") if isinstance(entry, dict) else None


def reported(*, but: str | None = None) -> list[Reported]:
    """The entries of the processes that hold abandoned calls now (all but `but`, a node)."""
    found = caches[CACHE_ALIAS].get_many([KEY.format(i) for i in range(SLOTS)])
    fresh = time.time() - settings.HEALTH_WORKER_MAX_AGE
    return [
        cast("Reported", e)
        for e in found.values()
        if isinstance(e, dict) and e.get("at", 0) >= fresh and e.get("node") != but
    ]
