"""Sockets on the Redis channel layer live as long as the client wants: idle for a minute, between
tokens ten seconds apart, fifty at once for two minutes while turns run. (Before the Redis client
was configured, every socket died after 5 idle seconds with code 1011.)"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from tests.fakes.chat_server import Reply

from .conftest import Client, Stack, deploy_env, finished, listen, of_turn, running

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture(scope="module")
def stack(model_server, database, fresh_redis, tmp_path_factory) -> Iterator[Stack]:
    env = deploy_env(
        tmp_path_factory.mktemp("soak-var"), model_server.base_url, database.url, AGENT_TIMEOUT="30"
    )
    with running(tmp_path_factory, "soak", env) as stack:
        stack.web("web")
        stack.worker("worker")
        yield stack


@pytest.fixture(scope="module")
def client(stack) -> Iterator[Client]:
    c = Client(stack.urls["web"], stack.api_key("soaker"))
    yield c
    c.close()


async def _with(listener, action):
    task = asyncio.create_task(listener)
    result = await asyncio.to_thread(action)
    return await task, result


def test_an_idle_socket_open_a_minute_gets_a_later_event(client):
    session = client.post("/sessions/", {"name": "idle"})
    events: list[dict] = []

    def act() -> dict:
        time.sleep(62)  # not one event for a minute: the elapsed time is what this test is about
        assert events == []
        return client.post(f"/sessions/{session['id']}/checkpoints/", {"name": "later"})

    def got_it(evs: list[dict]) -> bool:
        return any(e["type"] == "checkpoint.created" for e in evs)

    ended, checkpoint = asyncio.run(
        _with(listen(client, session["id"], events, got_it, time.monotonic() + 90), act)
    )
    assert ended == "done", (ended, events)
    assert [e["checkpoint"] for e in events if e["type"] == "checkpoint.created"] == [
        checkpoint["id"]
    ]


def test_a_reply_with_ten_second_gaps_streams_to_the_end(client, llm):
    session = client.post("/sessions/", {"name": "slow model"})
    text = "slow words arrive"
    llm.queue(Reply(text, delay=10))  # three chunks, ten seconds apart
    events: list[dict] = []
    turns: list[int] = []
    opened = threading.Event()

    def act() -> None:
        assert opened.wait(30)  # the socket is open
        turns.append(client.post(f"/sessions/{session['id']}/turns/", {"message": "go"}, 202)["id"])

    def done(evs: list[dict]) -> bool:
        return bool(turns) and finished(turns[0])(evs)

    ended, _ = asyncio.run(
        _with(listen(client, session["id"], events, done, time.monotonic() + 90, opened), act)
    )
    assert ended == "done", (ended, events)
    mine = of_turn(events, turns[0])
    assert "".join(e["delta"] for e in mine if e["type"] == "message.delta") == text
    assert mine[-1]["type"] == "turn.finished"
    assert mine[-1]["reply"] == text


OPEN_MINUTES = 2  # how long the fifty sockets stay open while turns run (the README quotes it)


def test_fifty_sockets_for_two_minutes_with_turns_running_never_disconnect(client, llm):
    sessions = [client.post("/sessions/", {"name": f"busy {i}"})["id"] for i in range(10)]
    sockets = [sid for sid in sessions for _ in range(5)]  # 50 sockets, 5 per session
    logs: list[list[dict]] = [[] for _ in sockets]
    posted: dict[int, list[int]] = {sid: [] for sid in sessions}
    end = time.monotonic() + OPEN_MINUTES * 60
    opened = [threading.Event() for _ in sockets]

    def run_turns() -> None:
        assert all(each.wait(60) for each in opened)  # the sockets are open
        i = 0
        while time.monotonic() < end - 15:
            sid = sessions[i % len(sessions)]
            llm.queue(Reply(f"reply {i} " + "word " * 10, delay=0.2))
            turn = client.post(f"/sessions/{sid}/turns/", {"message": f"m{i}", "wait": True})
            assert turn["status"] == "done", turn
            posted[sid].append(turn["id"])
            i += 1
            time.sleep(3)  # turns spread over the minutes the sockets stay open (elapsed time)

    async def main():
        listeners = [
            listen(client, sid, log, lambda _: False, end, each)
            for sid, log, each in zip(sockets, logs, opened, strict=True)
        ]
        results = await asyncio.gather(*listeners, asyncio.to_thread(run_turns))
        return results[:-1]

    endings = asyncio.run(main())
    assert endings == ["timeout"] * len(sockets)  # every socket was still open at the end
    assert sum(len(v) for v in posted.values()) >= 10
    for sid, log in zip(sockets, logs, strict=True):
        got = [e["turn"] for e in log if e["type"] == "turn.finished"]
        assert got == posted[sid], f"session {sid}: {got} != {posted[sid]}"
