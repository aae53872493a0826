"""GET /healthz on the served deployment: daphne in production mode (DJANGO_DEBUG=0: plain HTTP is
redirected to HTTPS, except /healthz, which a load balancer probes directly), a Celery worker and
beat, on a fresh PostgreSQL database and Redis.

Every part is ok while they run. A killed worker or a stopped beat fails its part once its
heartbeat is older than its max age (a few seconds here), and a new one brings it back. A long
turn on a solo worker does not make it look dead. With PostgreSQL or Redis refusing connections,
or taking them and never answering, daphne answers 503 naming that part, within seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.procs import free_port

from .conftest import Client, Stack, deploy_env, running

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

HEARTBEAT = 1  # HEALTH_HEARTBEAT_SECONDS of the stack
WORKER_MAX_AGE = 4  # HEALTH_WORKER_MAX_AGE
BEAT_MAX_AGE = 10  # HEALTH_BEAT_MAX_AGE (beat wakes at least every 5 s)
CHECK_TIMEOUT = 2  # HEALTH_CHECK_TIMEOUT, the default
# The longest /healthz may take with one server down: its check's timeout, and slack for a busy
# machine (4 workers of stacks on two cores: a request took 6.9 s once). Without the timeout a
# hung server holds the check for minutes (the pool waits 30 s); which timeout fired, each test
# reads from the check's error ("no connection within 2 s").
PROMPT = CHECK_TIMEOUT + 8


@pytest.fixture(scope="module")
def env(model_server, database, fresh_redis, tmp_path_factory) -> dict[str, str]:
    return deploy_env(
        tmp_path_factory.mktemp("health-var"),
        model_server.base_url,
        database.url,
        DJANGO_DEBUG="0",
        # Behind a TLS proxy: the API client below says https, the load balancer does not.
        DJANGO_SECURE_PROXY_SSL_HEADER="1",
        HEALTH_HEARTBEAT_SECONDS=str(HEARTBEAT),
        HEALTH_WORKER_MAX_AGE=str(WORKER_MAX_AGE),
        HEALTH_BEAT_MAX_AGE=str(BEAT_MAX_AGE),
        # A tool that hangs (its calls are abandoned past 3 s, and held by the worker): long
        # enough for the call to start before its deadline, on a loaded machine too.
        AGENT_TOOLS='["tests.agents.hung_tools.hang"]',
        AGENT_TOOL_TIMEOUT_SECONDS="3",
    )


@pytest.fixture(scope="module")
def stack(env, tmp_path_factory) -> Iterator[Stack]:
    with running(tmp_path_factory, "health", env) as stack:
        stack.urls["web"] = stack.listening("web", env)
        stack.worker("worker1")
        stack.beat()
        yield stack


def healthz(url: str) -> tuple[httpx.Response, float]:
    """The answer to a load balancer's probe (plain HTTP, no cookie), and how long it took."""
    started = time.monotonic()
    response = httpx.get(f"{url}/healthz", timeout=30)
    return response, time.monotonic() - started


def wait_for(url: str, holds: Callable[[httpx.Response], bool], timeout: float) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        response, _ = healthz(url)
        if holds(response):
            return response
        if time.monotonic() > deadline:
            raise AssertionError(f"within {timeout} s, /healthz kept answering {response.text}")
        time.sleep(0.25)


def proxied(stack: Stack, url: str, username: str) -> Client:
    """An integrator's API client of a new user, through the TLS proxy."""
    client = Client(url, stack.api_key(username))
    client.http.headers["X-Forwarded-Proto"] = "https"
    return client


def failing(response: httpx.Response) -> set[str]:
    return {name for name, check in response.json()["checks"].items() if not check["ok"]}


@pytest.fixture(params=["refused", "hung"])
def dead_server(request, silent_port) -> tuple[str, int]:
    """How the server is down, and its port."""
    return request.param, (free_port() if request.param == "refused" else silent_port)


def test_every_part_is_ok_with_a_worker_and_beat_running(stack, database):
    url = stack.urls["web"]
    response = wait_for(url, lambda r: r.status_code == 200, timeout=30)
    body = response.json()
    assert body["status"] == "ok", body
    assert body["celery"] == "configured", body
    assert set(body["checks"]) == {"database", "cache", "static", "worker", "beat"}
    assert all(check["ok"] for check in body["checks"].values()), body
    assert body["checks"]["worker"]["age_seconds"] <= WORKER_MAX_AGE
    assert "no-store" in response.headers["cache-control"]
    assert "set-cookie" not in response.headers
    assert response.headers["content-type"] == "application/json"
    assert database.name not in response.text
    assert "5432" not in response.text
    # The rest of the site over plain HTTP is sent to HTTPS; a HEAD probe is answered too.
    login = httpx.get(f"{url}/accounts/login/")
    assert login.status_code == 301
    assert login.headers["location"].startswith("https://")
    assert httpx.head(f"{url}/healthz").status_code == 200
    assert httpx.post(f"{url}/healthz").status_code == 405


def test_a_solo_worker_running_a_long_turn_stays_alive(stack, llm):
    """The solo pool runs a turn inline on the worker's event loop, where Celery's own timer
    would stop firing: the heartbeat's thread goes on."""
    url = stack.urls["web"]
    wait_for(url, lambda r: r.status_code == 200, timeout=30)
    client = proxied(stack, url, "watcher")
    try:
        session = client.post("/sessions/", {"name": "long"})
        turn_seconds = WORKER_MAX_AGE * 2 + 2
        llm.queue(Reply("word " * 50, delay=turn_seconds / 50))
        turn = client.post(f"/sessions/{session['id']}/turns/", {"message": "go on"}, 202)
        deadline = time.monotonic() + 20
        while client.get(f"/turns/{turn['id']}/")["status"] == "queued":
            assert time.monotonic() < deadline, "no worker took the turn"
            time.sleep(0.1)
        answers = []
        watch_until = time.monotonic() + WORKER_MAX_AGE * 2
        while time.monotonic() < watch_until:
            answers.append(healthz(url)[0])
            time.sleep(0.5)  # sampled all along the turn: the elapsed time is the point
        assert client.get(f"/turns/{turn['id']}/")["status"] == "running"  # it ran all along
        assert [failing(r) for r in answers] == [set()] * len(answers), answers[-1].text
        deadline = time.monotonic() + 30
        while client.get(f"/turns/{turn['id']}/")["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert client.get(f"/turns/{turn['id']}/")["status"] == "done"
    finally:
        client.close()


def test_a_tool_call_a_worker_abandoned_shows_in_healthz_and_goes_with_the_worker(stack, llm):
    """The worker's process, not the web process that answers /healthz, holds the call given
    up on (agents.tool_reports): /healthz says so, and no longer once that process is gone."""
    url = stack.urls["web"]
    wait_for(url, lambda r: r.status_code == 200, timeout=30)
    client = proxied(stack, url, "hanger")
    try:
        session = client.post("/sessions/", {"name": "hangs"})
        llm.queue(ToolCalls([ToolCall("hang", {"job": "import"})]), Reply("It did not answer."))
        turn = client.post(f"/sessions/{session['id']}/turns/", {"message": "run it"}, 202)
        deadline = time.monotonic() + 30
        while client.get(f"/turns/{turn['id']}/")["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, "the turn did not end"
            time.sleep(0.2)
    finally:
        client.close()
    tools = wait_for(url, lambda r: bool(r.json()["tools"]["elsewhere"]), 10).json()["tools"]
    assert tools["abandoned"] == 0  # the web process holds none
    assert tools["elsewhere"] == [{"abandoned": 1, "max_abandoned": 16, "full": False}]

    name = next(n for n in stack.procs if n.startswith("worker"))
    stack.kill(name)  # SIGKILL: its entry is no longer written, and lapses
    stack.procs.pop(name)
    try:
        wait_for(url, lambda r: r.json()["tools"]["elsewhere"] == [], WORKER_MAX_AGE + 10)
    finally:
        stack.worker("worker-after-hang")  # the module's next tests need a worker
    wait_for(url, lambda r: r.status_code == 200, timeout=30)


def test_a_killed_worker_fails_the_check_until_a_worker_runs_again(stack):
    url = stack.urls["web"]
    wait_for(url, lambda r: r.status_code == 200, timeout=30)
    name = next(n for n in stack.procs if n.startswith("worker"))
    stack.kill(name)  # SIGKILL: no goodbye
    killed = time.monotonic()
    down = wait_for(url, lambda r: r.status_code == 503, timeout=WORKER_MAX_AGE + 10)
    assert time.monotonic() - killed > WORKER_MAX_AGE - HEARTBEAT - 0.5  # not before its time
    assert failing(down) == {"worker"}, down.text
    worker = down.json()["checks"]["worker"]
    assert worker["age_seconds"] > WORKER_MAX_AGE
    assert worker["error"] == f"no heartbeat for {worker['age_seconds']:.0f} s"
    assert down.json()["status"] == "fail"
    assert "no-store" in down.headers["cache-control"]

    stack.procs.pop(name)
    stack.worker("worker2")
    up = wait_for(url, lambda r: r.status_code == 200, timeout=10)
    assert up.json()["checks"]["worker"]["ok"]


def test_a_stopped_beat_fails_the_check_until_beat_runs_again(stack):
    url = stack.urls["web"]
    wait_for(url, lambda r: r.status_code == 200, timeout=30)
    stack.stop("beat")
    down = wait_for(url, lambda r: r.status_code == 503, timeout=BEAT_MAX_AGE + 10)
    assert failing(down) == {"beat"}, down.text

    stack.procs.pop("beat")
    stack.beat()
    wait_for(url, lambda r: r.status_code == 200, timeout=15)


def test_with_the_database_down_healthz_answers_503_within_seconds(stack, env, dead_server):
    how, port = dead_server
    name = f"web-database-{how}"
    url = stack.listening(name, {**env, "DATABASE_URL": f"postgres://rollback@127.0.0.1:{port}/x"})
    try:
        for _ in range(2):  # the first request opens the pool; the second finds it retrying
            response, took = healthz(url)
            assert response.status_code == 503, response.text
            assert took < PROMPT, took
            assert failing(response) == {"database"}, response.text
            database = response.json()["checks"]["database"]
            # Refused or hung, the pool lends no connection in time.
            assert database["error"] == f"no connection within {CHECK_TIMEOUT} s", database
            assert str(port) not in response.text
            assert "127.0.0.1" not in response.text
    finally:
        stack.stop(name)


def test_with_redis_down_healthz_answers_503_within_seconds(stack, env, dead_server):
    how, port = dead_server
    name = f"web-redis-{how}"
    url = stack.listening(name, {**env, "REDIS_URL": f"redis://127.0.0.1:{port}/13"})
    try:
        for _ in range(2):
            response, took = healthz(url)
            assert response.status_code == 503, response.text
            assert took < PROMPT, took
            checks = response.json()["checks"]
            expected = "unreachable" if how == "refused" else f"no answer within {CHECK_TIMEOUT} s"
            assert checks["cache"] == {"ok": False, "ms": checks["cache"]["ms"], "error": expected}
            assert checks["database"]["ok"], response.text
            for part in ("worker", "beat"):  # their heartbeats are in Redis
                assert checks[part] == {"ok": False, "error": "unknown: the cache did not answer"}
            assert str(port) not in response.text
    finally:
        stack.stop(name)
