"""The served app's HTTP (rollback_site.http_handler.PooledHandler): Django's synchronous path in
one hop, on threads that keep their database connections from request to request, with
request_started and request_finished sent on the thread that holds those connections."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.core import signals
from django.db import connections
from django.db.backends.signals import connection_created

from accounts.services import apikey_create
from rollback_site.http_handler import THREAD_NAME, PooledHandler
from sessions_app.models import Session

pytestmark = pytest.mark.django_db(transaction=True)  # the pool's threads read the database


@pytest.fixture
def handler():
    served = PooledHandler(threads=1)
    yield served
    served.pool.submit(connections.close_all).result()
    served.pool.shutdown()


def request(
    handler: PooledHandler, method: str, path: str, key: str, body: bytes = b""
) -> tuple[int, dict[bytes, bytes], bytes]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [
            (b"host", b"testserver"),
            (b"authorization", f"Bearer {key}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 1234),
    }

    async def run() -> tuple[int, dict[bytes, bytes], bytes]:
        communicator = ApplicationCommunicator(handler, scope)
        await communicator.send_input({"type": "http.request", "body": body})
        start = await communicator.receive_output(10)
        content = b""
        while True:
            part = await communicator.receive_output(10)
            content += part.get("body", b"")
            if not part.get("more_body"):
                break
        await communicator.wait(10)
        return start["status"], {k.lower(): v for k, v in start["headers"]}, content

    return async_to_sync(run)()


def connection_of_the_pool(handler: PooledHandler) -> object:
    return handler.pool.submit(lambda: connections["default"].connection).result()


def test_requests_run_on_the_pools_thread_and_keep_its_connection(handler, alice):
    key = apikey_create(user=alice, name="k")[1]
    threads: list[str] = []

    def started(**_: object) -> None:
        threads.append(threading.current_thread().name)

    signals.request_started.connect(started)
    signals.request_finished.connect(started)
    try:
        status, _, _ = request(handler, "GET", "/api/v1/sessions/", key)
        first = connection_of_the_pool(handler)
        again, _, _ = request(handler, "GET", "/api/v1/sessions/", key)
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(started)

    assert (status, again) == (200, 200)
    assert first is not None
    assert connection_of_the_pool(handler) is first  # not opened again for the next request
    # Both signals, on the thread whose connections close_old_connections looks after.
    assert len(threads) == 4
    assert all(name.startswith(THREAD_NAME) for name in threads), threads


def test_a_posted_body_reaches_the_view_and_the_answer_carries_the_request_id(handler, alice):
    key = apikey_create(user=alice, name="k")[1]

    status, headers, content = request(
        handler, "POST", "/api/v1/sessions/", key, json.dumps({"name": "served"}).encode()
    )

    assert status == 201
    assert json.loads(content)["name"] == "served"
    assert Session.objects.filter(owner=alice, session_name="served").exists()
    assert headers[b"x-request-id"]


def test_a_bad_request_is_answered_by_the_pool_too(handler, alice):
    key = apikey_create(user=alice, name="k")[1]

    status, _, content = request(handler, "POST", "/api/v1/sessions/", key, b"{not json")

    assert status == 400
    assert "JSON" in json.loads(content)["detail"]


def test_every_connection_a_request_took_goes_back_once_it_is_answered(alice, monkeypatch):
    """With connections that do not outlive a request (PostgreSQL's pool: CONN_MAX_AGE 0), the
    thread that answered gives its connection back, even when another thread of the pool sends
    request_finished: the pool of DATABASE_POOL_SIZE connections was emptied by a burst (the
    connections stayed checked out by idle threads) and every later request waited for one."""
    key = apikey_create(user=alice, name="k")[1]
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    served = PooledHandler(threads=8)
    opened: list[object] = []

    def created(sender: object, connection: object, **_: object) -> None:
        opened.append(connection)

    connection_created.connect(created)
    try:
        with ThreadPoolExecutor(max_workers=16) as clients:
            statuses = list(
                clients.map(
                    lambda _: request(served, "GET", "/api/v1/sessions/", key)[0], range(40)
                )
            )
    finally:
        connection_created.disconnect(created)
        served.pool.shutdown()

    assert statuses == [200] * 40
    assert opened
    assert [c for c in opened if c.connection is not None] == []  # type: ignore[attr-defined]


def _hops(handler: PooledHandler) -> list[str]:
    """The calls made on the pool's threads (each a hop from the event loop and back)."""
    made: list[str] = []
    submit = handler.pool.submit

    def counted(fn, *args, **kwargs):
        made.append(getattr(fn, "__name__", repr(fn)))
        return submit(fn, *args, **kwargs)

    handler.pool.submit = counted  # type: ignore[method-assign]
    return made


def test_an_answer_whose_content_is_made_is_closed_in_the_same_hop(handler, alice):
    key = apikey_create(user=alice, name="k")[1]
    finished = threading.Event()
    seen_before_sent: list[bool] = []
    signals.request_finished.connect(finished_handler := (lambda **_: finished.set()))
    hops = _hops(handler)
    try:
        status, _, body = request(handler, "GET", "/api/v1/sessions/", key)
        seen_before_sent.append(finished.is_set())
    finally:
        signals.request_finished.disconnect(finished_handler)
    assert status == 200
    assert json.loads(body)["results"] == []
    assert seen_before_sent == [True]  # request_finished was sent
    assert len(hops) == 1, hops  # one hop: the answer made and closed


def test_a_streamed_answer_is_closed_after_it_went_out(handler, alice, monkeypatch):
    from django.http import StreamingHttpResponse

    order: list[str] = []

    async def pieces():
        order.append("sent a")
        yield b"a"
        order.append("sent b")
        yield b"b"

    monkeypatch.setattr(handler, "get_response", lambda request: StreamingHttpResponse(pieces()))
    signals.request_finished.connect(closed := (lambda **_: order.append("closed")))
    hops = _hops(handler)
    try:
        status, _, body = request(handler, "GET", "/anything/", "no-key")
    finally:
        signals.request_finished.disconnect(closed)
    assert (status, body) == (200, b"ab")
    assert order == ["sent a", "sent b", "closed"]
    assert len(hops) == 2, hops  # the answer made, then closed once sent
