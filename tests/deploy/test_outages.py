"""The served site while PostgreSQL or Redis is down: every door answers 503 within seconds.

A daphne process is started with its database or its Redis refusing connections, or taking them
and never answering (before: every API call, login and handshake was a 500 with Redis down, and
every request waited the pool's 30 s, then 500, with PostgreSQL down). The API answers 503 with
a readable `{"detail"}`, the pages (the login page and its POST, a chat) a readable HTML page
that needs neither server nor the static files, and a socket's handshake closes cleanly with
4503. A healthy daphne on the same database and Redis signs the browser in and makes the keys,
cookies and the session the broken one is asked for.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.procs import free_port

from .conftest import Stack, deploy_env, running

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

# The longest an answer may take with a server down: a Redis command's or a connection's timeout
# (3 s), after the pool's first wait (1 s), and slack for a busy machine. Before: 30 s or more.
PROMPT = 8.0
PASSWORD = "outage-password-1"  # noqa: S105 - a test user's password
MESSAGE = "Rollback is unavailable for a moment"


@pytest.fixture(scope="module")
def env(model_server, database, fresh_redis, tmp_path_factory) -> dict[str, str]:
    return deploy_env(tmp_path_factory.mktemp("outage-var"), model_server.base_url, database.url)


@pytest.fixture(scope="module")
def stack(env, tmp_path_factory) -> Iterator[Stack]:
    with running(tmp_path_factory, "outage", env) as stack:
        stack.urls["web"] = stack.listening("web", env)
        yield stack


@pytest.fixture(scope="module")
def visitor(stack) -> dict[str, str]:
    """A user with a password, an API key and a session, and a browser signed in on the healthy
    process: its cookies and CSRF token."""
    key = stack.api_key("olga", password=PASSWORD)
    url = stack.urls["web"]
    with httpx.Client(base_url=url, timeout=30) as api:
        made = api.post(
            "/api/v1/sessions/", json={"name": "kept"}, headers={"Authorization": f"Bearer {key}"}
        )
        assert made.status_code == 201, made.text
    with httpx.Client(base_url=url, timeout=30) as browser:
        page = browser.get("/accounts/login/")
        token = _csrf_token(page.text)
        csrf_cookie = browser.cookies["csrftoken"]
        signed_in = browser.post(
            "/accounts/login/",
            data={"username": "olga", "password": PASSWORD, "csrfmiddlewaretoken": token},
        )
        assert signed_in.status_code == 302, signed_in.text
        session_cookie = browser.cookies["sessionid"]
    return {
        "key": key,
        "session": str(made.json()["id"]),
        "token": token,
        "csrftoken": csrf_cookie,
        "sessionid": session_cookie,
    }


def _csrf_token(html: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert found, html[:500]
    return found.group(1)


@pytest.fixture(params=["refused", "hung"])
def dead_port(request, silent_port) -> int:
    return free_port() if request.param == "refused" else silent_port


def timed(call) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def handshake_close(url: str, session: str, key: str) -> tuple[int | None, float]:
    """Open the session's event stream with the key: the close code the server ends it with
    (None if it stays open for PROMPT seconds), and how long that took."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    async def run() -> int | None:
        ws_url = url.replace("http://", "ws://") + f"/ws/v1/sessions/{session}/"
        headers = {"Authorization": f"Bearer {key}"}
        async with connect(ws_url, additional_headers=headers, open_timeout=30) as ws:
            try:
                await asyncio.wait_for(ws.recv(), timeout=PROMPT)
            except ConnectionClosed as exc:
                return exc.rcvd.code if exc.rcvd else None
            except TimeoutError:
                return None
        return None

    started = time.monotonic()
    code = asyncio.run(run())
    return code, time.monotonic() - started


def assert_every_door_is_503(url: str, visitor: dict[str, str], *, login_page: int) -> None:
    """The API, the login page and its POST, a chat page and the socket, each within PROMPT.
    `login_page`: the login form needs the database, not Redis (200 with only Redis down)."""
    signed_in = {"sessionid": visitor["sessionid"]}
    with (
        httpx.Client(base_url=url, timeout=60) as client,
        httpx.Client(base_url=url, timeout=60, cookies={"csrftoken": visitor["csrftoken"]}) as new,
        httpx.Client(base_url=url, timeout=60, cookies=signed_in) as browser,
    ):
        for _ in range(2):  # the first request opens the pools; the second finds them failing
            api, took = timed(
                lambda: client.get(
                    "/api/v1/sessions/", headers={"Authorization": f"Bearer {visitor['key']}"}
                )
            )
            assert api.status_code == 503, api.text
            assert took < PROMPT, took
            assert api.headers["content-type"] == "application/json"
            assert set(api.json()) == {"detail"}
            assert MESSAGE in api.json()["detail"]
            assert "127.0.0.1" not in api.text

        page, took = timed(lambda: client.get("/accounts/login/"))
        assert page.status_code == login_page, page.text[:300]
        assert took < PROMPT, took

        login = {"username": "olga", "password": PASSWORD, "csrfmiddlewaretoken": visitor["token"]}
        posted, took = timed(lambda: new.post("/accounts/login/", data=login))
        assert posted.status_code == 503, posted.text[:300]
        assert took < PROMPT, took
        assert MESSAGE in posted.text
        assert 'data-testid="unavailable-page"' in posted.text
        assert "/static/" not in posted.text

        chat, took = timed(lambda: browser.get(f"/chat/{visitor['session']}/"))
        assert chat.status_code == 503, chat.text[:300]
        assert took < PROMPT, took
        assert chat.headers["content-type"].startswith("text/html")
        assert MESSAGE in chat.text

    code, took = handshake_close(url, visitor["session"], visitor["key"])
    assert code == 4503
    assert took < PROMPT, took


def test_the_healthy_process_signs_in_and_serves_the_chat(stack, visitor):
    """The control: the same requests on the process whose servers answer."""
    url = stack.urls["web"]
    with httpx.Client(base_url=url, timeout=30, cookies={"sessionid": visitor["sessionid"]}) as b:
        chat = b.get(f"/chat/{visitor['session']}/")
    assert chat.status_code == 200, chat.text[:300]
    code, _ = handshake_close(url, visitor["session"], visitor["key"])
    assert code is None  # open, and silent


def test_with_redis_down_every_door_answers_503_within_seconds(stack, env, visitor, dead_port):
    name = f"web-redis-{dead_port}"
    url = stack.listening(name, {**env, "REDIS_URL": f"redis://127.0.0.1:{dead_port}/0"})
    try:
        assert_every_door_is_503(url, visitor, login_page=200)
    finally:
        stack.stop(name)


def test_with_postgres_down_every_door_answers_503_within_seconds(stack, env, visitor, dead_port):
    name = f"web-database-{dead_port}"
    database_url = f"postgres://rollback@127.0.0.1:{dead_port}/x"
    url = stack.listening(name, {**env, "DATABASE_URL": database_url})
    try:
        assert_every_door_is_503(url, visitor, login_page=503)
    finally:
        stack.stop(name)
