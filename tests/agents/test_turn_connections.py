"""What a turn does with its threads' database connections (core.db.release_connection): on
SQLite each thread keeps its one connection (no thread opens one twice over three turns, the
request's waits included: closing them cost a turn about 10 ms); on PostgreSQL every connection
goes back to the pool once the turn has ended."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.db.backends.signals import connection_created

from tests.fakes.chat_server import Reply
from tests.waits import until
from tests.web.api.conftest import bearer_client

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_turn_keeps_sqlites_connections_and_gives_postgresqls_back(alice, fake_llm, celery_eager):
    api = bearer_client(alice)
    sid = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()["id"]
    opened: list[str] = []  # the thread that opened each connection

    def counted(sender: object, connection: object, **kwargs: object) -> None:
        opened.append(threading.current_thread().name)

    connection_created.connect(counted)
    try:
        for n in range(3):  # on the embedded pool's threads; this thread waits for each
            fake_llm.queue(Reply(f"Answer {n}."))
            body = {"message": f"question {n}", "wait": True}
            done = api.post(f"/api/v1/sessions/{sid}/turns/", body, format="json")
            assert done.json()["reply"] == f"Answer {n}."
    finally:
        connection_created.disconnect(counted)
    if connection.vendor == "sqlite":
        assert sorted(opened) == sorted(set(opened)), "a thread opened its connection again"
    else:
        pool = connection.pool

        def all_back() -> bool:
            stats = pool.get_stats()
            return stats.get("pool_available", 0) == stats.get("pool_size", -1)

        until(all_back, "every connection back in the pool")
