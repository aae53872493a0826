"""The one bridge from synchronous code to asynchronous code: `bridge.call(fn, *args)`.

Sync code (a request's thread, a worker's turn, the Telegram relay's sender) that must use an
async library (channels_redis's `group_send`, python-telegram-bot's `Bot`, the MCP SDK's
`Client`) calls it here, and nowhere else starts an event loop, a loop thread or an executor for
that. Every call runs on one event loop per process: anyio's blocking portal, on a daemon thread
named `rollback-bridge`, started at the first call and kept for the life of the process (a forked
child, such as a Celery prefork worker, starts its own at its first call: a thread does not
survive a fork). One loop means one Redis connection pool for the publisher, one httpx pool per
Telegram bot, and no loop or thread made per call (`async_to_sync` made both, and with Redis a
connection, for each message: ~4 ms against ~0.3 ms, measured).

The caller waits for the result, so one thread's calls keep their order, and an error is raised
in the caller. A call from the bridge's own thread (async code on the bridge) is refused: it
would wait for itself. Code already running on an event loop awaits its library directly.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TypeVar, TypeVarTuple, Unpack

import anyio
from anyio.from_thread import BlockingPortal

__all__ = ["THREAD_NAME", "call"]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

THREAD_NAME = "rollback-bridge"

_portal: BlockingPortal | None = None
_lock = threading.Lock()


def _forget_after_fork() -> None:
    """In a forked child: the parent's loop thread is not there, so the next call starts one."""
    global _portal, _lock
    _portal = None
    _lock = threading.Lock()  # it may have been held by another thread at the fork


os.register_at_fork(after_in_child=_forget_after_fork)


def _start() -> BlockingPortal:
    """The loop and its portal, on a daemon thread that runs as long as the process: nothing
    stops it (anyio's start_blocking_portal would, on leaving its context, wait for the loop,
    which at the interpreter's exit no longer runs)."""
    ready: Future[BlockingPortal] = Future()

    async def serve() -> None:
        async with BlockingPortal() as portal:
            ready.set_result(portal)
            await portal.sleep_until_stopped()

    def run() -> None:
        try:
            anyio.run(serve)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    threading.Thread(target=run, name=THREAD_NAME, daemon=True).start()
    return ready.result()


def _the_portal() -> BlockingPortal:
    global _portal
    found = _portal
    if found is not None:
        return found
    with _lock:
        if _portal is None:
            _portal = _start()
        return _portal


def call(fn: Callable[[Unpack[Ts]], Awaitable[T]], *args: *Ts, timeout: float | None = None) -> T:
    """Run `await fn(*args)` on the process's bridge loop and wait for its result. Past
    `timeout` seconds the call is cancelled and TimeoutError raised."""
    future = _the_portal().start_task_soon(fn, *args)
    try:
        return future.result(timeout=timeout)
    except TimeoutError:
        if future.done():  # the call's own TimeoutError
            raise
        future.cancel()
        raise TimeoutError(f"no result within {timeout} seconds") from None
