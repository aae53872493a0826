"""The served process's HTTP threads (rollback_site.http_handler) while integrators wait on their
turns: a request with `"wait": true` holds a thread until its turn ends, so a dozen of them (more
than a small fixed pool would have) must leave the pages and the API answering meanwhile."""

from __future__ import annotations

import sqlite3
import threading
import time

import httpx
import pytest

from tests.fakes.chat_server import Hang
from tests.procs import app_env, prepared
from tests.waits import until

WAITS = 12
SETUP = f"""
from accounts.models import User
from sessions_app.services import session_create
owner = User.objects.create_user("waiter")
print(" ".join(str(session_create(owner=owner, name=f"s{{i}}").pk) for i in range({WAITS})))
"""


@pytest.fixture
def served(llm, tmp_path):
    env = app_env(tmp_path / "var", llm.base_url, API_TURN_WAIT_SECONDS="8")
    with prepared(env, tmp_path) as services:
        yield services, env


def turns_in(database: str) -> int:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT count(*) FROM sessions_app_turn").fetchone()[0])


def test_a_dozen_requests_waiting_on_turns_leave_the_api_answering(served, llm):
    services, env = served
    out, key = services.setup_with_key(env, SETUP, "waiter")
    sessions = out.strip().splitlines()[-1].split()
    base = services.start_daphne(env)
    auth = {"Authorization": f"Bearer {key}"}
    llm.queue(*[Hang(seconds=12) for _ in sessions])  # no turn ends before its wait gives up
    answered: dict[str, float] = {}

    def wait_on_a_turn(session: str) -> None:
        response = httpx.post(
            f"{base}/api/v1/sessions/{session}/turns/",
            headers=auth,
            json={"message": "take your time", "wait": True},
            timeout=60,
        )
        answered[session] = time.monotonic()
        assert response.status_code == 202  # still running when the wait gave up

    waiting = [threading.Thread(target=wait_on_a_turn, args=(s,)) for s in sessions]
    for thread in waiting:
        thread.start()
    database = f"{env['ROLLBACK_VAR_DIR']}/rollback.sqlite3"
    until(lambda: turns_in(database) == WAITS, "every request to have started its turn")

    listed = httpx.get(f"{base}/api/v1/sessions/?limit=1", headers=auth, timeout=60)
    listed_at = time.monotonic()
    for thread in waiting:
        thread.join(60)

    assert listed.status_code == 200
    assert listed.json()["count"] == WAITS
    assert len(answered) == WAITS
    # The list answered while every request still waited on its turn.
    assert all(at > listed_at for at in answered.values()), (listed_at, answered)
