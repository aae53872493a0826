"""The site while Redis does not answer, in process: the API, the login and a socket's
handshake answer "unavailable" (503, or close code 4503), never a 500, and soon. The served
processes, with PostgreSQL down too, are in tests/deploy/test_outages.py."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client, override_settings

from accounts.services import apikey_create
from rollback_site.asgi import application
from tests.procs import free_port

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGE = "Rollback is unavailable for a moment"


@pytest.fixture(params=["refused", "hung"])
def dead_redis(request, silent_port) -> Iterator[str]:
    """The cache and the channel layer on a Redis that refuses connections or never answers,
    with the settings' timeouts made short. (Set and restored here, before the cache is cleared
    after the test.)"""
    port = free_port() if request.param == "refused" else silent_port
    url = f"redis://127.0.0.1:{port}/0"
    caches = {
        **settings.CACHES,
        "default": {
            "BACKEND": "core.cache.SharedRedisCache",
            "LOCATION": url,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        },
    }
    layers = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": url, "socket_connect_timeout": 0.5}]},
        }
    }
    with override_settings(REDIS_COMMAND_TIMEOUT=0.5, CACHES=caches, CHANNEL_LAYERS=layers):
        yield url


def test_the_api_answers_503_with_a_readable_detail(dead_redis, alice):
    _, secret = apikey_create(user=alice, name="script")
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {secret}")
    started = time.monotonic()
    response = client.get("/api/v1/sessions/")
    assert time.monotonic() - started < 5
    assert response.status_code == 503, response.content
    assert set(response.json()) == {"detail"}
    assert MESSAGE in response.json()["detail"]


def test_signing_in_answers_a_503_page(dead_redis, alice):
    client = Client(raise_request_exception=False)
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "alice-password-1"}
    )
    assert response.status_code == 503
    assert MESSAGE in response.content.decode()


def test_a_sockets_handshake_is_closed_with_4503(dead_redis, alice, session):
    _, secret = apikey_create(user=alice, name="script")
    headers = [(b"authorization", f"Bearer {secret}".encode()), (b"host", b"localhost")]

    async def run() -> tuple[dict, dict]:
        socket = WebsocketCommunicator(application, f"/ws/v1/sessions/{session.pk}/", headers)
        await socket.send_input({"type": "websocket.connect"})
        first = await socket.receive_output(timeout=5)
        second = await socket.receive_output(timeout=5)
        await socket.wait(timeout=5)
        return first, second

    started = time.monotonic()
    accepted, closed = async_to_sync(run)()
    assert time.monotonic() - started < 5
    assert accepted["type"] == "websocket.accept"
    assert closed["type"] == "websocket.close"
    assert closed["code"] == 4503
