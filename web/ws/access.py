"""The sockets' access checks, batched: the checks that the sockets of one process ask for while
one is under way are answered together, by one query for them all (`watch_access_many`), on
the sockets' pool of threads (web.ws.db).

A socket checks its access before the events it delivers (a check reused for
ROLLBACK_WS_ACCESS_CACHE_SECONDS). With a hundred sockets streaming, that was a hundred queries
a second, each with its own hop to a thread and its own borrowed connection, and an event waited
for its socket's query behind the others' in the pool's queue; now a second's checks cost the
process a query or two, and no check waits behind more than one other.
"""

from __future__ import annotations

import asyncio
import weakref

from sessions_app.selectors import watch_access_many
from sessions_app.selectors.lookups import Access, Watcher
from web.ws.db import socket_db

# At most this many watchers in one query (its IN lists); more make the next batch.
BATCH = 500


class _Checks:
    """The checks asked for on one event loop: those waiting, and whether a query runs."""

    def __init__(self) -> None:
        self.waiting: dict[Watcher, list[asyncio.Future[Access]]] = {}
        self.running: asyncio.Task[None] | None = None
        self.asked = 0  # checks asked so far

    async def ask(self, watcher: Watcher) -> Access:
        self.asked += 1
        answer: asyncio.Future[Access] = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(watcher, []).append(answer)
        if self.running is None:
            self.running = asyncio.create_task(self.answer_all())
        return await answer

    async def answer_all(self) -> None:
        try:
            while self.waiting:
                watchers = list(self.waiting)[:BATCH]
                batch = {w: self.waiting.pop(w) for w in watchers}
                try:
                    answers = await socket_db(watch_access_many)(watchers)
                except Exception as exc:  # each socket that asked decides what it means
                    for futures in batch.values():
                        for future in futures:
                            if not future.done():
                                future.set_exception(exc)
                    continue
                for watcher, futures in batch.items():
                    for future in futures:
                        if not future.done():  # its socket went meanwhile
                            future.set_result(answers[watcher])
        finally:
            self.running = None


_checks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Checks] = weakref.WeakKeyDictionary()


def checks_here() -> _Checks:
    """The checks of the running event loop."""
    loop = asyncio.get_running_loop()
    checks = _checks.get(loop)
    if checks is None:
        checks = _checks[loop] = _Checks()
    return checks


async def access_of(*, user_id: int, session_id: int, api_key_id: int | None) -> Access:
    """Whether a socket may still hear its session's events (`watch_access_many`), asked together
    with every other socket of this event loop that asks meanwhile."""
    return await checks_here().ask((user_id, session_id, api_key_id))
