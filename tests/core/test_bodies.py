"""core.bodies.BodyLimit, the body limit in front of Django under any ASGI server: driven through
the ASGI interface with a small application that records what reached it."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync

from core.bodies import BodyLimit

LIMIT = 1000


@pytest.fixture(autouse=True)
def _small_limit(settings):
    settings.ROLLBACK_MAX_REQUEST_BYTES = LIMIT


class Recorder:
    """An ASGI application that reads the whole body and answers 200 with what it got."""

    def __init__(self) -> None:
        self.calls = 0
        self.headers: dict[bytes, bytes] = {}
        self.body = b""

    async def __call__(self, scope, receive, send) -> None:
        self.calls += 1
        self.headers = dict(scope["headers"])
        while True:
            message = await receive()
            self.body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def run(chunks: list[bytes], headers: list[tuple[bytes, bytes]]) -> tuple[Recorder, list[dict]]:
    """Send a request whose body arrives in `chunks`; the application and the messages sent."""
    app = Recorder()
    incoming = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    sent: list[dict] = []

    async def receive() -> dict:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/v1/sessions/", "headers": headers}
    async_to_sync(BodyLimit(app))(scope, receive, send)
    return app, sent


def test_a_chunked_body_under_the_limit_reaches_the_app_with_its_content_length():
    app, sent = run([b'{"name": ', b'"x"}'], [(b"transfer-encoding", b"chunked")])
    assert app.body == b'{"name": "x"}'
    assert app.headers[b"content-length"] == b"13"
    assert sent[0]["status"] == 200


def test_a_chunked_body_over_the_limit_is_refused_with_413_before_the_app_runs():
    app, sent = run([b"x" * 600, b"x" * 600, b"x" * 600], [(b"transfer-encoding", b"chunked")])
    assert app.calls == 0
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"]) == {
        "detail": f"The request body is larger than the limit of {LIMIT} bytes."
    }


def test_a_declared_length_over_the_limit_is_refused_with_413_before_the_app_runs():
    app, sent = run([b"x" * 10], [(b"content-length", str(LIMIT + 1).encode())])
    assert app.calls == 0
    assert sent[0]["status"] == 413


def test_a_body_with_its_content_length_under_the_limit_passes_unchanged():
    app, sent = run([b"x" * LIMIT], [(b"content-length", str(LIMIT).encode())])
    assert app.body == b"x" * LIMIT
    assert sent[0]["status"] == 200


def test_an_unreadable_content_length_is_refused_with_400():
    app, sent = run([b"x"], [(b"content-length", b"1, 2")])
    assert app.calls == 0
    assert sent[0]["status"] == 400
    assert "Content-Length" in json.loads(sent[1]["body"])["detail"]


def test_a_request_without_a_body_gets_no_content_length_added():
    app, sent = run([b""], [])
    assert b"content-length" not in app.headers
    assert sent[0]["status"] == 200
