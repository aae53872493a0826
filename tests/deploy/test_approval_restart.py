"""Issue 36: a turn waiting for an approval holds nothing and survives a restart of every
process. It waits; daphne, the worker and beat are all SIGKILLed and started again; the owner
approves through the new web process; the turn finishes once, its tool run once (served for
real on PostgreSQL and Redis)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

from .conftest import Client, Stack, deploy_env, running

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

EMAIL = {"to": "bob@example.com", "subject": "hello"}


@pytest.fixture(scope="module")
def tool_log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("approval-restart") / "sent.txt"
    path.touch()
    return path


@pytest.fixture(scope="module")
def stack(model_server, database, fresh_redis, tmp_path_factory, tool_log) -> Iterator[Stack]:
    env = deploy_env(
        tmp_path_factory.mktemp("approval-restart-var"),
        model_server.base_url,
        database.url,
        AGENT_TOOLS="tests.agents.approval_tools.logged_send_email",
        APPROVAL_TOOL_LOG=str(tool_log),
        AGENT_APPROVAL_SECONDS="300",
        AGENT_TURN_STALE_SECONDS="6",
        TURN_HEARTBEAT_SECONDS="1",
        TURN_RECOVERY_SECONDS="2",
        API_TURN_WAIT_SECONDS="60",
    )
    with running(tmp_path_factory, "approval-restart", env) as stack:
        stack.web("web1")
        stack.worker("worker1", pool="threads", concurrency=2)
        stack.beat()
        yield stack


def until(check, what: str, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {seconds} s")


def test_a_waiting_turn_survives_a_restart_of_every_process_and_runs_its_tool_once(
    stack, llm, database, tool_log
):
    key = stack.api_key("restarter")
    client = Client(stack.urls["web1"], key)
    session = client.post("/sessions/", {"name": "restarted"})
    llm.queue(ToolCalls([ToolCall("logged_send_email", EMAIL, id="call_1")]), Reply("Sent."))
    turn = client.post(
        f"/sessions/{session['id']}/turns/", {"message": "mail bob", "wait": True}, 202
    )
    turn_id = turn["id"]
    assert turn["status"] == "awaiting_approval", turn
    client.close()

    # Every process dies at once, then a new set starts.
    for name, proc in list(stack.procs.items()):
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        stack.procs.pop(name)
    # A few recovery periods pass on the new beat: the paused turn is not taken for a dead one.
    stack.web("web2")
    stack.worker("worker2", pool="threads", concurrency=2)
    stack.beat()
    time.sleep(8)
    (row,) = database.query("SELECT status, attempts FROM sessions_app_turn WHERE id = %s", turn_id)
    assert row == ("awaiting_approval", 1)
    assert tool_log.read_text() == ""

    client = Client(stack.urls["web2"], key)
    pending = client.get(f"/turns/{turn_id}/")["pending_approval"]
    answer = {"tool_call_id": "call_1", "approved": True, "call": pending["call"], "attempt": 1}
    client.post(f"/turns/{turn_id}/approve/", answer, 200)
    done = until(
        lambda: (t := client.get(f"/turns/{turn_id}/"))["status"] == "done" and t,
        "the turn never finished",
    )
    assert done["reply"] == "Sent."
    assert done["tools_used"] == ["logged_send_email"]
    assert tool_log.read_text().splitlines() == ["bob@example.com hello"]
    # Answered again: a 409, and the tool is not run again.
    again = client.http.post(f"/api/v1/turns/{turn_id}/approve/", json=answer)
    assert again.status_code == 409, again.text
    time.sleep(1)
    assert tool_log.read_text().splitlines() == ["bob@example.com hello"]
    client.close()
