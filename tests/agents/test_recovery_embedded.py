"""The embedded mode (no broker, so no beat): a turn left running by a web process that died is
taken over by the restarted process, which runs the recovery job on a thread of its own."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.procs import app_env, prepared

SETUP = """
from datetime import timedelta
from django.utils import timezone
from accounts.models import User
from sessions_app.models import Turn
from sessions_app.services import session_create
from sessions_app.turns import turn_claim, turn_start
owner = User.objects.create_user("restarter")
session = session_create(owner=owner, name="interrupted")
turn = turn_start(session=session, message="were you there?")
turn_claim(turn_id=turn.pk, worker="a-process-that-died:1")
Turn.objects.filter(pk=turn.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
print(session.pk, turn.pk)
"""


@pytest.fixture
def served(llm, tmp_path):
    env = app_env(
        tmp_path / "var",
        llm.base_url,
        AGENT_TURN_STALE_SECONDS="2",
        TURN_HEARTBEAT_SECONDS="0.5",
        TURN_RECOVERY_SECONDS="1",
    )
    with prepared(env, tmp_path) as services:
        yield services, env


def test_a_restarted_web_process_takes_over_the_turn_its_predecessor_left_running(served):
    from websockets.sync.client import connect

    services, env = served
    out, key = services.setup_with_key(env, SETUP, "restarter")
    session_id, turn_id = map(int, out.strip().splitlines()[-1].split())
    base = services.start_daphne(env)
    auth = {"Authorization": f"Bearer {key}"}
    events: list[dict] = []
    url = base.replace("http://", "ws://") + f"/ws/v1/sessions/{session_id}/"
    with connect(url, additional_headers=auth, open_timeout=20) as ws:
        deadline = time.monotonic() + 30
        while not any(e["type"] == "turn.finished" for e in events):
            assert time.monotonic() < deadline, events
            try:
                events.append(json.loads(ws.recv(timeout=1)))
            except TimeoutError:
                # On a loaded machine the take-over may finish the turn before the socket has
                # joined: then no event of it ever comes, and the turn says it is done.
                status = httpx.get(f"{base}/api/v1/turns/{turn_id}/", headers=auth).json()
                if status["status"] == "done":
                    break
    # The take-over starts attempt 2. On a loaded machine it may start before the socket has
    # joined: then the socket's first frame is the turn's snapshot instead of its start.
    started = [e.get("attempt") for e in events if e["type"] == "turn.started"]
    assert started == [2] or (
        not started and (not events or events[0]["type"] == "turn.snapshot")
    ), events
    attempts = services.manage(
        env,
        "shell",
        "-c",
        f"from sessions_app.models import Turn; print(Turn.objects.get(pk={turn_id}).attempts)",
    )
    assert attempts.strip().splitlines()[-1] == "2"
    turn = httpx.get(f"{base}/api/v1/turns/{turn_id}/", headers=auth).json()
    assert turn["status"] == "done"
    assert turn["reply"] == "Echo: were you there?"
    history = httpx.get(f"{base}/api/v1/sessions/{session_id}/messages/", headers=auth).json()
    assert [m["content"] for m in history["results"]] == [
        "were you there?",
        "Echo: were you there?",
    ]
