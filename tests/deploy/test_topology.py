"""Two daphne processes, Celery workers and beat on one PostgreSQL database and one Redis.

A socket listens on the first web process while the turn is posted to the second; a worker runs
it. Workers are SIGKILLed mid-reply (the whole worker, or the pool child running the turn): the
recovery job hands the turn to a live worker, which answers it again from its user message, and
the turn finishes exactly once. With its attempts used up it fails, and says so.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from tests.fakes.chat_server import Reply

from .conftest import Client, Stack, deploy_env, listen, of_turn, running

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

STALE = 6  # AGENT_TURN_STALE_SECONDS of the stack: a silent worker is dead after this long
TAKEOVER_LIMIT = 30  # the promise: taken over within 30 s of the heartbeat stopping
FINAL = "The second attempt answers this in full."
CUT = "This first attempt is cut off when its worker is killed " + "on and on " * 30


@pytest.fixture(scope="module")
def stack(model_server, database, fresh_redis, tmp_path_factory) -> Iterator[Stack]:
    env = deploy_env(
        tmp_path_factory.mktemp("topology-var"),
        model_server.base_url,
        database.url,
        AGENT_TURN_STALE_SECONDS=str(STALE),
        TURN_HEARTBEAT_SECONDS="1",
        TURN_RECOVERY_SECONDS="2",
        AGENT_TURN_ATTEMPTS="2",
    )
    with running(tmp_path_factory, "topology", env) as stack:
        stack.web("web1")
        stack.web("web2")
        stack.worker("worker1")
        stack.worker("worker2")
        stack.beat()
        yield stack


@pytest.fixture(scope="module")
def clients(stack) -> Iterator[tuple[Client, Client]]:
    key = stack.api_key("integrator")
    first, second = Client(stack.urls["web1"], key), Client(stack.urls["web2"], key)
    yield first, second
    first.close()
    second.close()


def running_pid(database, turn_id: int, attempt: int, timeout: float = 20) -> int:
    """The process running `attempt` of the turn (its worker records host:pid when it claims)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = database.query(
            "SELECT metadata->>'worker', attempts, status FROM sessions_app_turn WHERE id = %s",
            turn_id,
        )
        if rows and rows[0][1] == attempt and rows[0][2] == "running" and rows[0][0]:
            return int(rows[0][0].rsplit(":", 1)[1])
        time.sleep(0.1)
    raise AssertionError(f"attempt {attempt} of turn {turn_id} never started: {rows}")


def kill_when_streaming(events: list[dict], turn_id: int, pid: int, timeout: float = 20) -> float:
    """SIGKILL `pid` once the turn's first delta has reached the listening socket."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e["type"] == "message.delta" for e in of_turn(events, turn_id)):
            os.kill(pid, signal.SIGKILL)
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError(f"no delta of turn {turn_id} arrived: {events}")


def stop_workers(stack: Stack) -> None:
    for name in [n for n in stack.procs if n not in ("web1", "web2", "beat")]:
        stack.stop(name)
        stack.procs.pop(name)


def worker_name(stack: Stack, pid: int) -> str:
    return next(n for n, p in stack.procs.items() if p.pid == pid and p.poll() is None)


def finished_any(events: list[dict]) -> bool:
    return any(e["type"] in ("turn.finished", "turn.failed") for e in events)


def deadline(seconds: float = 90) -> float:
    return time.monotonic() + seconds


async def _run(coro_listen, action):
    task = asyncio.create_task(coro_listen)
    result = await asyncio.to_thread(action)
    return await task, result


def assert_answered_once(client: Client, database, session_id: int, turn_id: int) -> None:
    turn = client.get(f"/turns/{turn_id}/")
    assert turn["status"] == "done", turn
    assert turn["reply"] == FINAL, turn
    history = client.get(f"/sessions/{session_id}/messages/")["results"]
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "tell me"),
        ("assistant", FINAL),
    ]
    assert database.query("SELECT attempts FROM sessions_app_turn WHERE id = %s", turn_id) == [(2,)]


def test_a_turn_posted_to_one_web_process_streams_to_the_other_and_survives_its_worker(
    stack, clients, llm, database
):
    listener, poster = clients
    session = poster.post("/sessions/", {"name": "topology"})
    llm.queue(Reply(CUT, delay=0.3), Reply(FINAL, delay=0.05))
    events: list[dict] = []
    marks: dict[str, float] = {}
    opened = threading.Event()

    def act() -> int:
        assert opened.wait(30)  # the socket on web1 is open
        turn = poster.post(f"/sessions/{session['id']}/turns/", {"message": "tell me"}, 202)
        pid = running_pid(database, turn["id"], attempt=1)
        marks["killed"] = kill_when_streaming(events, turn["id"], pid)
        stack.procs.pop(worker_name(stack, pid)).wait(10)
        return turn["id"]

    ended, turn_id = asyncio.run(
        _run(listen(listener, session["id"], events, finished_any, deadline(), opened), act)
    )
    marks["finished"] = time.monotonic()
    assert ended == "done", (ended, events)
    assert marks["finished"] - marks["killed"] < TAKEOVER_LIMIT + 5

    mine = of_turn(events, turn_id)
    kinds = [e["type"] for e in mine]
    assert kinds.count("turn.finished") == 1
    assert "turn.failed" not in kinds
    starts = [i for i, e in enumerate(mine) if e["type"] == "turn.started"]
    assert [mine[i]["attempt"] for i in starts] == [1, 2]
    # After the second start, the reply streams whole and in order, then the turn finishes.
    second = mine[starts[1] + 1 :]
    deltas = "".join(e["delta"] for e in second if e["type"] == "message.delta")
    assert deltas == FINAL
    assert second[-1]["type"] == "turn.finished"
    assert second[-1]["reply"] == FINAL
    assert_answered_once(listener, database, session["id"], turn_id)
    stack.worker("worker3")  # two workers again for the next test


def test_a_killed_pool_child_is_replaced_and_its_turn_taken_over(stack, clients, llm, database):
    listener, poster = clients
    # Only a prefork worker is left to take turns, so the turn runs in its pool child.
    stop_workers(stack)
    stack.worker("prefork", pool="prefork")
    session = poster.post("/sessions/", {"name": "child"})
    llm.queue(Reply(CUT, delay=0.3), Reply(FINAL, delay=0.05))
    events: list[dict] = []
    opened = threading.Event()

    def act() -> int:
        assert opened.wait(30)  # the socket is open
        turn = poster.post(f"/sessions/{session['id']}/turns/", {"message": "tell me"}, 202)
        child = running_pid(database, turn["id"], attempt=1)
        assert child != stack.procs["prefork"].pid  # the pool child, not the worker itself
        kill_when_streaming(events, turn["id"], child)
        return turn["id"]

    ended, turn_id = asyncio.run(
        _run(listen(listener, session["id"], events, finished_any, deadline(), opened), act)
    )
    assert ended == "done", (ended, events)
    assert [e["type"] for e in of_turn(events, turn_id)].count("turn.finished") == 1
    assert_answered_once(listener, database, session["id"], turn_id)
    assert stack.procs["prefork"].poll() is None  # the worker itself lived on


def test_a_turn_whose_attempts_are_used_up_fails_with_its_event(stack, clients, llm, database):
    listener, poster = clients
    stop_workers(stack)
    stack.worker("doomed1")
    session = poster.post("/sessions/", {"name": "unlucky"})
    llm.queue(Reply(CUT, delay=0.3), Reply(CUT, delay=0.3))
    events: list[dict] = []
    opened = threading.Event()

    def act() -> int:
        assert opened.wait(30)  # the socket is open
        turn = poster.post(f"/sessions/{session['id']}/turns/", {"message": "tell me"}, 202)
        for attempt, nxt in ((1, "doomed2"), (2, "survivor")):
            pid = running_pid(database, turn["id"], attempt=attempt, timeout=TAKEOVER_LIMIT + 10)
            kill_when_streaming(events, turn["id"], pid)
            stack.procs.pop(worker_name(stack, pid)).wait(10)
            stack.worker(nxt)
        return turn["id"]

    ended, turn_id = asyncio.run(
        _run(listen(listener, session["id"], events, finished_any, deadline(120), opened), act)
    )
    assert ended == "done", (ended, events)
    failed = [e for e in of_turn(events, turn_id) if e["type"] == "turn.failed"]
    assert len(failed) == 1
    assert "stopped (2 times" in failed[0]["error"]
    turn = listener.get(f"/turns/{turn_id}/")
    assert turn["status"] == "failed"
    assert "kept" in turn["error"]
    # The user's message is kept and the session takes the next message.
    history = listener.get(f"/sessions/{session['id']}/messages/")["results"]
    assert [m["content"] for m in history] == ["tell me"]
    llm.reset()
    llm.queue(Reply("after the failure"))
    again = listener.post(f"/sessions/{session['id']}/turns/", {"message": "again", "wait": True})
    assert again["status"] == "done"
    assert again["reply"] == "after the failure"
