"""100 replies streaming at once to 100 sockets, on two daphne processes, two Celery workers,
PostgreSQL and Redis: every socket gets every piece of its turn's reply, once and in order, and
the turn's end (issue 34: 38-54 of 100 sockets never got `turn.finished` when the channel layer
dropped what overflowed a web process's inbox). With the default settings nothing is dropped; with
a channel layer far too small for the load, the drops are counted in /healthz and the sockets
still lose nothing: they read what they missed back from the stream's store and the database."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.chat_server import Reply

from .conftest import Client, Stack, deploy_env, listen, of_turn, running

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

STREAMS = 100
WORDS = 24  # a short reply (the machine is small): some 24 pieces, a second and a half


def reply_to(body: dict) -> Reply:
    """The model's answer to "stream <n>": a reply of its own, streamed word by word."""
    asked = str(body["messages"][-1].get("content") or "")
    return Reply(f"{asked}: " + " ".join(f"w{n}" for n in range(WORDS)), delay=0.06)


@pytest.fixture(scope="module", params=["default", "tiny"])
def stack(request, model_server, database, fresh_redis, tmp_path_factory) -> Iterator[Stack]:
    """Two daphne, two workers of 20 threads and beat; "tiny": a channel layer of 30 messages."""
    extra = {"CHANNEL_LAYER_CAPACITY": "30"} if request.param == "tiny" else {}
    env = deploy_env(
        tmp_path_factory.mktemp("streams-var"), model_server.base_url, database.url, **extra
    )
    with running(tmp_path_factory, "streams", env) as stack:
        stack.web("web1")
        stack.web("web2")
        stack.worker("worker1", pool="threads", concurrency=20)
        stack.worker("worker2", pool="threads", concurrency=20)
        stack.beat()
        yield stack


def dropped(stack: Stack) -> int:
    counts = [
        httpx.get(f"{stack.urls[web]}/healthz", timeout=10).json()["channel_layer"]["dropped"]
        for web in ("web1", "web2")
    ]
    assert counts[0] == counts[1]  # one count, for every process
    return counts[0]


def test_100_sockets_each_get_every_piece_of_their_reply_in_order_and_its_end(stack, llm, request):
    llm.default = reply_to
    key = stack.api_key(f"streamer-{request.node.callspec.id}")
    clients = [Client(stack.urls["web1"], key), Client(stack.urls["web2"], key)]
    try:
        sessions = [clients[0].post("/sessions/", {"name": f"s{i}"})["id"] for i in range(STREAMS)]
        dropped_before = dropped(stack)
        logs: list[list[dict]] = [[] for _ in sessions]
        turns: dict[int, int] = {}
        deadline = time.monotonic() + 240
        opened = [threading.Event() for _ in sessions]

        def post_all() -> None:
            assert all(each.wait(60) for each in opened)  # the sockets are open
            for i, sid in enumerate(sessions):  # each to the other web process than its socket's
                body = {"message": f"stream {i}"}
                turns[sid] = clients[(i + 1) % 2].post(f"/sessions/{sid}/turns/", body, 202)["id"]

        def stall() -> None:
            """With "tiny", web1 stops reading its inbox for a second once its sockets get
            pieces, so that the layer drops past its 30 messages however fast this machine drains
            it (idle, it kept up with the whole load once, and nothing was dropped)."""
            if request.node.callspec.id != "tiny":
                return
            assert all(each.wait(60) for each in opened)
            web1_logs = logs[::2]  # the sockets of even sessions listen on web1
            while not any(e["type"] == "message.delta" for log in web1_logs for e in log[:]):
                assert time.monotonic() < deadline
                time.sleep(0.01)
            pid = stack.procs["web1"].pid
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(1.0)
            finally:
                os.kill(pid, signal.SIGCONT)

        def ended(events: list[dict]) -> bool:
            """The session's one turn ended. (Not `finished(turns[sid])`: on a busy machine the
            turn can end before its POST's answer, and so its id, reaches this process.)"""
            return any(e["type"] in ("turn.finished", "turn.failed") for e in events)

        async def main() -> list[str]:
            listeners = [
                listen(clients[i % 2], sid, log, ended, deadline, opened[i])
                for i, (sid, log) in enumerate(zip(sessions, logs, strict=True))
            ]
            *endings, _, _ = await asyncio.gather(
                *listeners, asyncio.to_thread(post_all), asyncio.to_thread(stall)
            )
            return endings

        endings = asyncio.run(main())
        assert endings == ["done"] * STREAMS, [e for e in endings if e != "done"]
        for i, (sid, log) in enumerate(zip(sessions, logs, strict=True)):
            expected = f"stream {i}: " + " ".join(f"w{n}" for n in range(WORDS))
            mine = of_turn(log, turns[sid])
            pieces = [(e["seq"], e["delta"]) for e in mine if e["type"] == "message.delta"]
            assert [seq for seq, _ in pieces] == list(range(1, len(pieces) + 1)), sid
            assert "".join(text for _, text in pieces) == expected, sid
            assert mine[-1]["type"] == "turn.finished", mine[-1]
            assert mine[-1]["reply"] == expected
            assert [e["type"] for e in mine].count("turn.finished") == 1
        if request.node.callspec.id == "default":
            assert dropped(stack) == dropped_before  # room enough: nothing was dropped
        else:
            assert dropped(stack) > dropped_before  # dropped, counted, and lost to no one
    finally:
        for client in clients:
            client.close()
