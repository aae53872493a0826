"""The sockets' database work runs on a pool of its own (web.ws.db), several calls at once, not
on asgiref's one thread for synchronous code, where every socket's read queued behind every
other's."""

from __future__ import annotations

import ast
import asyncio
import threading
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync

from web.ws.db import THREAD_NAME, socket_db

pytestmark = pytest.mark.django_db(transaction=True)

WS = Path(__file__).resolve().parents[2] / "web" / "ws"


def test_two_reads_run_at_once_on_the_sockets_pool():
    # Each read waits for the other to have started: on one lane they never would.
    both_in = threading.Barrier(2, timeout=10)

    def read() -> str:
        both_in.wait()
        return threading.current_thread().name

    async def two() -> list[str]:
        return list(await asyncio.gather(socket_db(read)(), socket_db(read)()))

    names = async_to_sync(two)()

    assert len(set(names)) == 2
    assert all(name.startswith(THREAD_NAME) for name in names), names


def test_a_read_sees_the_database_and_gives_its_answer(alice):
    from accounts.models import User

    def count() -> int:
        return User.objects.filter(username="alice").count()

    assert async_to_sync(socket_db(count))() == 1


def test_no_consumer_reads_on_the_one_lane():
    """Every database call of the sockets goes through socket_db."""
    lanes = []
    for path in sorted(WS.glob("*.py")):
        if path.name == "db.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id == "database_sync_to_async":
                lanes.append(f"{path.name}:{node.lineno}")
    assert lanes == []


def test_no_event_of_a_socket_waits_for_the_one_lane(alice, session, monkeypatch):
    """Channels closes the one lane's old connections before each message a consumer handles
    (a hop there per event of every socket); ours handle theirs on their own threads."""
    import json

    import channels.consumer
    from channels.testing import WebsocketCommunicator

    from core import events
    from rollback_site.asgi import application
    from tests.sockets import socket_headers

    hops = []

    async def close_old_connections_on_the_lane() -> None:
        hops.append(1)

    monkeypatch.setattr(
        channels.consumer, "aclose_old_connections", close_old_connections_on_the_lane
    )

    headers = socket_headers(alice)

    async def run() -> dict:
        path = f"/ws/v1/sessions/{session.pk}/"
        communicator = WebsocketCommunicator(application, path, headers=headers)
        connected, _ = await communicator.connect(timeout=5)
        assert connected
        await socket_db(events.message_delta)(session=session.pk, turn=7, delta="Hel")
        frame = json.loads(await communicator.receive_from(timeout=5))
        await communicator.disconnect(timeout=10)
        return frame

    assert async_to_sync(run)()["delta"] == "Hel"
    assert hops == []
