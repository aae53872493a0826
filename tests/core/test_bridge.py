"""core.bridge: sync code runs async code on one event loop per process, on a thread named
rollback-bridge; the caller gets the result or the error, and a call past its timeout is
cancelled."""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest

from core import bridge


async def where() -> tuple[str, int]:
    return threading.current_thread().name, id(asyncio.get_running_loop())


def test_calls_from_many_threads_run_on_the_one_bridge_loop():
    with ThreadPoolExecutor(4) as pool:
        found = set(pool.map(lambda _: bridge.call(where), range(20)))
    assert len(found) == 1
    ((name, _),) = found
    assert name == bridge.THREAD_NAME
    assert [t.name for t in threading.enumerate()].count(bridge.THREAD_NAME) == 1


def test_arguments_in_and_the_result_or_the_error_out():
    async def add(a: int, b: int) -> int:
        return a + b

    async def fail(reason: str) -> None:
        raise ValueError(reason)

    assert bridge.call(add, 2, 3) == 5
    with pytest.raises(ValueError, match="no luck"):
        bridge.call(fail, "no luck")


def test_a_call_past_its_timeout_is_cancelled():
    cancelled = threading.Event()

    async def never() -> None:
        try:
            await anyio.Event().wait()
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        bridge.call(never, timeout=0.1)
    assert cancelled.wait(10)
    assert bridge.call(where)[0] == bridge.THREAD_NAME  # the loop goes on


def test_a_call_from_the_bridge_loop_itself_is_refused():
    async def nested() -> None:
        bridge.call(where)

    with pytest.raises(RuntimeError):
        bridge.call(nested)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_starts_a_bridge_of_its_own():
    # A Celery prefork child: the parent's loop thread is not in it (a call there would wait for
    # a loop that nothing runs, until its timeout).
    bridge.call(where)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, and leave without pytest's teardown
        code = 1
        try:
            name, _ = bridge.call(where, timeout=10)
            code = 0 if name == bridge.THREAD_NAME else 2
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read(1)
    os.waitpid(pid, 0)
    assert answer == bytes([0])
