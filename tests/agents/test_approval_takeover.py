"""A turn paused for an approval by a process that died: it holds nothing, so the restarted
process's recovery job leaves it paused (issue 36; it used to take it over and ask again), and
the owner's approval through the API queues its continuation (attempt 2), which runs the call
once and finishes the turn. Served for real (daphne, the embedded mode), like
test_recovery_embedded."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.fakes.chat_server import Reply
from tests.procs import app_env, prepared

SETUP = """
from datetime import timedelta
from django.utils import timezone
from accounts.models import User
from tests.agents.approval_tools import pause
from sessions_app.models import Turn
from sessions_app.services import session_create
from sessions_app.turns import turn_claim, turn_start
owner = User.objects.create_user("approver")
session = session_create(owner=owner, name="paused")
turn = turn_start(session=session, message="mail bob")
turn = turn_claim(turn_id=turn.pk, worker="a-process-that-died:1")
pause(turn, "call_first", {"to": "bob@example.com", "subject": "hello"})
# Alive until the test's socket listens (STALE below): the takeover's events must reach it.
Turn.objects.filter(pk=turn.pk).update(heartbeat_at=timezone.now() + timedelta(hours=1))
print(session.pk, turn.pk)
"""

# The process that paused the turn dies: its last sign of life is older than
# AGENT_TURN_STALE_SECONDS (not than AGENT_APPROVAL_SECONDS, which would expire the wait).
STALE = """
from datetime import timedelta
from django.utils import timezone
from sessions_app.models import Turn
Turn.objects.filter(pk=%d).update(heartbeat_at=timezone.now() - timedelta(seconds=30))
"""

EMAIL = {"to": "bob@example.com", "subject": "hello"}


@pytest.fixture
def served(llm, tmp_path):
    env = app_env(
        tmp_path / "var",
        llm.base_url,
        TURN_RECOVERY_SECONDS="1",
        AGENT_TURN_STALE_SECONDS="5",  # its last sign of life (30 s ago) is long past this
        AGENT_TOOLS="tests.agents.approval_tools.send_email",
        AGENT_APPROVAL_SECONDS="60",
    )
    with prepared(env, tmp_path) as services:
        yield services, env


def test_a_turn_paused_by_a_dead_process_stays_paused_and_its_approval_finishes_it(served, llm):
    from websockets.sync.client import connect

    services, env = served
    out, key = services.setup_with_key(env, SETUP, "approver")
    session_id, turn_id = map(int, out.strip().splitlines()[-1].split())
    llm.queue(Reply("Sent."))
    base = services.start_daphne(env)
    auth = {"Authorization": f"Bearer {key}"}
    events: list[dict] = []
    url = base.replace("http://", "ws://") + f"/ws/v1/sessions/{session_id}/"
    with connect(url, additional_headers=auth, open_timeout=20) as ws:
        services.manage(env, "shell", "-c", STALE % turn_id)
        time.sleep(3)  # the recovery job (every second) runs: a paused turn is not dead
        waiting = httpx.get(f"{base}/api/v1/turns/{turn_id}/", headers=auth).json()
        assert waiting["status"] == "awaiting_approval"
        assert waiting["pending_approval"]["tool_call_id"] == "call_first"
        answer = httpx.post(
            f"{base}/api/v1/turns/{turn_id}/approve/",
            json={"tool_call_id": "call_first", "approved": True},
            headers=auth,
        )
        assert answer.status_code == 200, answer.text
        deadline = time.monotonic() + 40
        while not any(e["type"] == "turn.finished" for e in events):
            assert time.monotonic() < deadline, events
            events.append(json.loads(ws.recv(timeout=deadline - time.monotonic())))
    assert [e.get("attempt") for e in events if e["type"] == "turn.started"] == [2]
    assert not [e for e in events if e["type"] == "tool.approval_requested"]
    turn = httpx.get(f"{base}/api/v1/turns/{turn_id}/", headers=auth).json()
    assert turn["status"] == "done"
    assert turn["tools_used"] == ["send_email"]
    assert turn["pending_approval"] is None
    history = httpx.get(f"{base}/api/v1/sessions/{session_id}/messages/", headers=auth).json()
    tools = [m for m in history["results"] if m["role"] == "tool"]
    assert [m["tool_result"] for m in tools] == ["sent to bob@example.com"]
