"""Waiting in tests.

`until`: a condition wait. No test waits a fixed time for something to happen; it waits until
it has happened (a sleep stays only where elapsed time is what the test is about).

`lags_of_waits_beside_a_socket`: `"wait": true` on a served web process that also holds a
socket of another session, as the deployment tests (tests/deploy/test_wait.py) and the embedded
mode's (tests/web/api/test_wait_served.py) drive it. The measure is from the turn's end as the
database recorded it (`finished_at`, written by whichever process ran the turn, on the same
machine's clock) to the answer's arrival.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

import httpx

from tests.fakes.chat_server import Reply

T = TypeVar("T")


def until(check: Callable[[], T], what: str, timeout: float = 30.0, every: float = 0.01) -> T:
    """Call `check` until it returns something true, and return that; fail naming `what` after
    `timeout` seconds. The timeout only bounds a test that fails: one that passes goes on as soon
    as the condition holds, so a slow machine makes no test fail."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}")
        time.sleep(every)
    return found


def lags_of_waits_beside_a_socket(base_url: str, key: str, llm, count: int = 3) -> list[float]:
    """Post `count` turns with `"wait": true` to `base_url` while a socket of another session
    is open on the same process; for each, the seconds from its `finished_at` to the answer."""
    from websockets.asyncio.client import connect

    headers = {"Authorization": f"Bearer {key}"}
    http = httpx.Client(base_url=f"{base_url}/api/v1", headers=headers, timeout=120)
    lags: list[float] = []

    def waits() -> None:
        for i in range(count):
            llm.queue(Reply(f"Answer {i}.", delay=0.02))
            body = {"session_key": "agent:wait:main:c1", "message": f"ask {i}", "wait": True}
            response = http.post("/chat/", json=body)
            arrived = time.time()
            assert response.status_code == 201, response.text
            turn = response.json()
            assert (turn["status"], turn["reply"]) == ("done", f"Answer {i}."), turn
            lags.append(arrived - datetime.fromisoformat(turn["finished_at"]).timestamp())

    async def with_socket(session_id: int) -> None:
        url = base_url.replace("http://", "ws://") + f"/ws/v1/sessions/{session_id}/"
        # The web process holds a socket of another session while the waits run.
        async with connect(url, additional_headers=headers, open_timeout=20):
            await asyncio.to_thread(waits)

    try:
        watched = http.post("/sessions/", json={"name": "watched"})
        assert watched.status_code == 201, watched.text
        asyncio.run(with_socket(watched.json()["id"]))
    finally:
        http.close()
    return lags
