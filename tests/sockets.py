"""What the tests that open the app's sockets in process (channels' WebsocketCommunicator on
rollback_site.asgi.application) share: a signed-in browser's handshake headers, and a turn as a
worker holds it."""

from __future__ import annotations

from django.conf import settings
from django.test import Client

from sessions_app.models import Turn
from sessions_app.turns import turn_claim, turn_start


def socket_headers(user, origin: str | None = "http://localhost") -> list[tuple[bytes, bytes]]:
    """The handshake headers of a browser signed in as `user`: the cookie of a login of its own
    (one client per call: signing another user in would end this one's), Host localhost, and
    the page's `origin` (none when None)."""
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    headers = [(b"cookie", cookie.encode()), (b"host", b"localhost")]
    if origin:
        headers.append((b"origin", origin.encode()))
    return headers


def claimed_turn(session, message: str = "question") -> Turn:
    """A turn of `session`, started and claimed as a worker claims it (running, attempt 1)."""
    turn = turn_claim(turn_id=turn_start(session=session, message=message).pk)
    assert turn is not None
    return turn
