"""The logs of the served app (`python -m rollback_site.serve`, under ASGI) with LOG_FORMAT=json:
every line of its output is a JSON object, daphne's own and its access log included; a turn
posted through the API carries the request's id (the X-Request-ID the API answered with) on
every line the worker logs for it, and its last line reports the model's latency and tokens."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.chat_server import Reply
from tests.procs import Services, app_env

CELERY_FORMAT = re.compile(r"\[\d{4}-\d\d-\d\d [\d:,]+: [A-Z]+/")
SETUP = "from accounts.models import User; User.objects.create_user('logger')"


@pytest.fixture(scope="module")
def served(model_server, tmp_path_factory) -> Iterator[tuple[Services, str, str]]:
    tmp = tmp_path_factory.mktemp("served-logs")
    env = app_env(tmp / "var", model_server.base_url, LOG_FORMAT="json")
    services = Services(tmp)
    try:
        services.prepare(env)
        _, key = services.setup_with_key(env, SETUP, "logger")
        base = services.start_daphne(env)
        yield services, base, key
    finally:
        services.stop_all()


def log_lines(services: Services) -> list[dict]:
    """Every line daphne wrote so far, each parsed as JSON (a line that is not fails the test)."""
    lines = services.logs["daphne"].read_text().splitlines()
    parsed = []
    for number, line in enumerate(lines, 1):
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"line {number} of the log is not JSON: {line!r}")
        assert isinstance(parsed[-1], dict), line
    return parsed


def test_a_turn_posted_through_the_api_logs_json_lines_with_its_request_id(served, llm):
    services, base, key = served
    llm.queue(Reply("Logged and answered.", prompt_tokens=21, completion_tokens=3))
    auth = {"Authorization": f"Bearer {key}"}
    # Named as a new session is, so a title request follows the turn.
    new = {"name": "New session"}
    session = httpx.post(f"{base}/api/v1/sessions/", json=new, headers=auth, timeout=30)
    assert session.status_code == 201, session.text
    response = httpx.post(
        f"{base}/api/v1/sessions/{session.json()['id']}/turns/",
        json={"message": "hello", "wait": True},
        headers=auth,
        timeout=60,
    )
    assert response.status_code == 201, response.text
    turn = response.json()
    assert turn["status"] == "done"
    request_id = response.headers["X-Request-ID"]

    deadline = time.monotonic() + 20  # the last line comes after the title, once answered
    while True:
        lines = log_lines(services)
        ends = [line for line in lines if line.get("message") == "turn finished"]
        if ends or time.monotonic() > deadline:
            break
        time.sleep(0.2)

    assert {"timestamp", "level", "logger", "message"} <= set(lines[0])
    assert any(line["logger"] == "rollback.access" for line in lines)  # daphne's access log
    of_the_turn = [line for line in lines if line.get("turn_id") == turn["id"]]
    assert len(of_the_turn) >= 3  # the model's request, the title's, the end
    for line in of_the_turn:
        assert line["request_id"] == request_id, line
        assert line["session_id"] == session.json()["id"], line
        assert isinstance(line["user_id"], int), line
    last = of_the_turn[-1]
    assert ends == [last]
    assert last["logger"] == "rollback.turns"
    assert last["level"] == "INFO"
    assert last["status"] == "done"
    assert last["finish_reason"] == "stop"
    assert last["model"] == "fake-model"
    assert (last["input_tokens"], last["output_tokens"]) == (21, 3)
    assert isinstance(last["latency_ms"], int)
    assert isinstance(last["first_token_ms"], int)


@pytest.mark.parametrize(
    ("command", "says"),
    [(["worker", "--pool", "solo"], "ready."), (["beat"], "beat: Starting...")],
    ids=["worker", "beat"],
)
def test_celery_worker_and_beat_log_json_lines_too(served, command, says):
    """Celery would set up logging its own way (its format on the root logger); the app's
    setup_logging receiver makes it apply settings.LOGGING instead. (`-q`: no banner, which
    Celery prints rather than logs.)"""
    services, _, _ = served
    env = app_env(services.log_dir / "var", "http://127.0.0.1:9/v1", LOG_FORMAT="json")
    name = f"celery-{command[0]}"
    cmd = [sys.executable, "-m", "celery", "-A", "rollback_site", "-q", *command]
    services.start(name, cmd, env)
    deadline = time.monotonic() + 30
    try:
        while says not in services.logs[name].read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        services.stop(name)
    lines = services.logs[name].read_text().splitlines()
    logged = [json.loads(line) for line in lines if line.startswith("{")]
    assert any(says in line["message"] for line in logged), lines
    assert all({"timestamp", "level", "logger", "message"} <= set(line) for line in logged)
    # Nothing in Celery's own format ("[2025-01-01 12:00:00,000: INFO/MainProcess] ..."). What
    # else there is Celery printed, not logged: a warning when it runs as root, its goodbye.
    assert not [line for line in lines if CELERY_FORMAT.match(line)]
