"""A worker SIGKILLed while the tool it was approved to run is running (in the turn's
continuation, which recorded the call as started before running it): the recovery job hands the
turn to the other worker, which never runs the call again unasked: it is on record as one that
may have run, and the model is told so (served for real: daphne, two Celery workers and beat on
PostgreSQL and Redis)."""

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
    """One line per run of the slow tool (tests.agents.approval_tools.slow_send_email)."""
    path = tmp_path_factory.mktemp("approval-kill") / "sent.txt"
    path.touch()
    return path


@pytest.fixture(scope="module")
def stack(model_server, database, fresh_redis, tmp_path_factory, tool_log) -> Iterator[Stack]:
    env = deploy_env(
        tmp_path_factory.mktemp("approval-kill-var"),
        model_server.base_url,
        database.url,
        AGENT_TOOLS="tests.agents.approval_tools.slow_send_email",
        APPROVAL_TOOL_LOG=str(tool_log),
        AGENT_APPROVAL_SECONDS="120",
        AGENT_TURN_STALE_SECONDS="6",
        TURN_HEARTBEAT_SECONDS="1",
        TURN_RECOVERY_SECONDS="2",
        AGENT_TURN_ATTEMPTS="2",
        API_TURN_WAIT_SECONDS="60",
    )
    with running(tmp_path_factory, "approval-kill", env) as stack:
        stack.web("web1")
        stack.worker("worker1")
        stack.worker("worker2")
        stack.beat()
        yield stack


def until(check, what: str, seconds: float = 60):
    """`check()`'s first true value, looked at every 0.1 s."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {seconds} s")


def runs(tool_log: Path) -> list[str]:
    return tool_log.read_text().splitlines()


def test_a_call_running_when_its_worker_is_killed_is_may_have_run_and_never_run_again(
    stack, llm, database, tool_log
):
    client = Client(stack.urls["web1"], stack.api_key("approver"))
    session = client.post("/sessions/", {"name": "killed mid-call"})
    # The continuation runs the call and dies running it; the next one is told it may have run.
    llm.queue(
        ToolCalls([ToolCall("slow_send_email", EMAIL, id="call_1")]),
        Reply("I did not send it again."),
    )
    turn = client.post(
        f"/sessions/{session['id']}/turns/", {"message": "mail bob", "wait": True}, 202
    )
    turn_id = turn["id"]
    first = turn["pending_approval"]
    assert turn["status"] == "awaiting_approval", turn
    assert (first["tool_call_id"], first["attempt"], first["call"]) == ("call_1", 1, 1)
    assert first["may_have_run"] is False
    answer = {"tool_call_id": "call_1", "approved": True, "call": 1, "attempt": 1}
    client.post(f"/turns/{turn_id}/approve/", answer, 200)

    # The tool runs (its minute has begun): the worker running it is killed.
    until(lambda: runs(tool_log), "the tool never started")
    rows = database.query(
        "SELECT metadata->>'worker' FROM sessions_app_turn WHERE id = %s", turn_id
    )
    pid = int(rows[0][0].rsplit(":", 1)[1])
    os.kill(pid, signal.SIGKILL)
    name = next(n for n, p in stack.procs.items() if p.pid == pid)
    stack.procs.pop(name).wait(10)

    # The other worker takes the turn over and finishes it without running the call again.
    done = until(
        lambda: (t := client.get(f"/turns/{turn_id}/"))["status"] == "done" and t,
        "the turn never finished",
    )
    assert done["reply"] == "I did not send it again."
    assert done["tools_used"] == []
    assert runs(tool_log) == ["bob@example.com hello"]  # not run again without an answer
    (record,) = database.query(
        "SELECT metadata->'may_have_run' FROM sessions_app_turn WHERE id = %s", turn_id
    )[0]
    assert [(r["tool_call_id"], r["attempt"], r["args"]) for r in record] == [("call_1", 1, EMAIL)]
    assert "may already have run" in llm.messages(-1)[-1]["content"]
    # The answer again: a 409.
    stale = client.http.post(f"/api/v1/turns/{turn_id}/approve/", json=answer)
    assert stale.status_code == 409, stale.text
    assert runs(tool_log) == ["bob@example.com hello"]
    client.close()
