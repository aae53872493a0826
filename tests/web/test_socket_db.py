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
