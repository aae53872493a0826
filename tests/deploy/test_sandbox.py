"""The sandboxed shell on the scaled-out deployment (daphne, a Celery worker on PostgreSQL and
Redis), through the REST API as an integration drives it: the bad-input list of issue 38 run by
a scripted model's run_shell calls, each a bounded result with the host, the database and the
other session untouched; a command's files kept as the turn's and listed by the API; a Stop
that kills a running command at once."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import pytest

from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.processes import alive

from .conftest import Client, Stack, deploy_env, finished, listen, of_turn, running

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture(scope="module")
def stack(model_server, database, fresh_redis, tmp_path_factory) -> Iterator[Stack]:
    env = deploy_env(
        tmp_path_factory.mktemp("sandbox-var"),
        model_server.base_url,
        database.url,
        SANDBOX_TIMEOUT_SECONDS="3",
        SANDBOX_MAX_FILES="2000",
        WORKSPACE_MAX_FILES="40",
        WORKSPACE_MAX_FILE_BYTES="10000",
        CANARY_NOTE="canary-5d1e",
        API_TURN_WAIT_SECONDS="60",
    )
    with running(tmp_path_factory, "sandbox", env) as stack:
        stack.web("web")
        stack.worker("worker", pool="threads", concurrency=4)
        yield stack


def run(client: Client, llm, session: int, command: str) -> dict:
    """The scripted model runs `command` with run_shell; the tool message's JSON result."""
    llm.queue(ToolCalls([ToolCall("run_shell", {"command": command})]), Reply("Ran it."))
    turn = client.post(f"/sessions/{session}/turns/", {"message": "run it", "wait": True})
    assert turn["status"] == "done", turn
    messages = client.get(f"/sessions/{session}/messages/?limit=1000")["results"]
    tool = [m for m in messages if m["role"] == "tool"][-1]
    assert tool["tool_name"] == "run_shell"
    assert tool["effect"] == "workspace"
    return json.loads(tool["tool_result"])


def files(client: Client, session: int) -> set[str]:
    return {f["path"] for f in client.get(f"/sessions/{session}/files/")["results"]}


def test_the_bad_input_list_gets_bounded_results_and_leaves_the_rest_untouched(
    stack, llm, database
):
    client = Client(stack.urls["web"], stack.api_key("runner"))
    other = client.post("/sessions/", {"name": "the other session"})
    client.http.put(f"/api/v1/sessions/{other['id']}/files/keep.txt", content=b"untouched")
    session = client.post("/sessions/", {"name": "bad input"})["id"]
    users_before = database.query("SELECT count(*) FROM accounts_user")[0][0]

    bomb = run(client, llm, session, "f(){ f|f& }; f; sleep 30.0511")
    assert bomb["ended"] in {"timeout", "exited"}  # its sleep got a process, or none was left
    loop = run(client, llm, session, "trap '' TERM; while :; do :; done")
    assert loop["ended"] == "timeout"
    big = run(client, llm, session, "echo ok > ok.txt; yes > big")
    assert big["changed_files"] == ["ok.txt"]
    assert any(n["path"] == "big" for n in big["not_kept"])
    many = run(client, llm, session, "i=0; while [ $i -lt 100000 ]; do : > f$i; i=$((i+1)); done")
    assert many["ended"] == "files"
    assert len(files(client, session)) == 40  # WORKSPACE_MAX_FILES of this stack
    secrets = run(
        client,
        llm,
        session,
        "cat /etc/shadow; cat /proc/1/environ; env; ls /var/lib/postgresql; echo x > /usr/x",
    )
    shown = secrets["stdout"] + secrets["stderr"]
    assert "canary-5d1e" not in shown
    assert "DATABASE_URL" not in shown
    assert "postgres" not in secrets["stdout"]
    net = run(
        client,
        llm,
        session,
        'python3 -c "import socket\nfor p in (5432, 6379):\n'
        "  try: socket.create_connection(('127.0.0.1', p), 1); print('reached', p)\n"
        "  except OSError: print('refused', p)\"",
    )
    assert net["stdout"].split("\n")[:2] == ["refused 5432", "refused 6379"], net
    names = run(client, llm, session, "ln -s /etc/hostname link; touch \"$(printf 'a\\nb')\"")
    assert {n["path"] for n in names["not_kept"]} == {"link", "a\nb"}
    noisy = run(client, llm, session, "head -c 52428800 /dev/zero; head -c 2000 /dev/urandom >&2")
    assert noisy["exit_code"] == 0
    assert noisy["stdout_cut_bytes"] == 50 * 1024 * 1024 - 65536  # SANDBOX_MAX_OUTPUT_BYTES kept

    assert alive("30.0511") == 0
    assert files(client, other["id"]) == {"keep.txt"}
    kept = client.http.get(f"/api/v1/sessions/{other['id']}/files/keep.txt")
    assert kept.content == b"untouched"
    assert database.query("SELECT count(*) FROM accounts_user")[0][0] == users_before
    client.close()


def test_a_commands_files_are_the_turns_and_a_stop_kills_a_running_command(stack, llm):
    client = Client(stack.urls["web"], stack.api_key("stopper"))
    session = client.post("/sessions/", {"name": "stop it"})["id"]
    result = run(client, llm, session, "echo 'print(6*7)' > main.py && python3 main.py")
    assert (result["stdout"], result["changed_files"]) == ("42\n", ["main.py"])
    assert files(client, session) == {"main.py"}

    llm.queue(
        ToolCalls([ToolCall("run_shell", {"command": "echo began > s.txt; sleep 60.0512"})]),
        Reply("never asked"),
    )
    turn = client.post(f"/sessions/{session}/turns/", {"message": "run a long one"}, 202)
    deadline = time.monotonic() + 30
    while alive("60.0512") == 0:
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.1)
    stopped_at = time.monotonic()
    client.post(f"/turns/{turn['id']}/cancel/", expect=200)
    while alive("60.0512"):
        assert time.monotonic() - stopped_at < 10, "the command outlived its turn's Stop"
        time.sleep(0.1)
    until = time.monotonic() + 30
    while client.get(f"/turns/{turn['id']}/")["status"] != "cancelled":
        assert time.monotonic() < until
        time.sleep(0.2)
    client.close()


def test_an_integrations_socket_hears_a_runs_output_while_it_runs(stack, llm):
    """Across the worker and Redis's channel layer: `tool.output` pieces, in order, the first
    well before the run ends, then `tool.finished` with the whole output."""
    client = Client(stack.urls["web"], stack.api_key("listener"))
    session = client.post("/sessions/", {"name": "live"})["id"]
    llm.queue(
        ToolCalls([ToolCall("run_shell", {"command": "echo one; sleep 2; echo two"})]),
        Reply("Two lines."),
    )
    events: list[dict] = []
    opened = threading.Event()
    turn_id: list[int] = []

    def hear() -> None:
        asyncio.run(
            listen(
                client,
                session,
                events,
                lambda seen: bool(turn_id) and finished(turn_id[0])(seen),
                time.monotonic() + 60,
                opened,
            )
        )

    listener = threading.Thread(target=hear, name="test-listener")
    listener.start()
    assert opened.wait(20)
    turn_id.append(client.post(f"/sessions/{session}/turns/", {"message": "run it"}, 202)["id"])
    listener.join(70)
    assert not listener.is_alive()
    mine = of_turn(events, turn_id[0])
    kinds = [e["type"] for e in mine]
    pieces = [e for e in mine if e["type"] == "tool.output"]
    assert "".join(p["text"] for p in pieces) == "one\ntwo\n"
    assert kinds.index("tool.output") < kinds.index("tool.finished")
    assert [p["offset"] for p in pieces] == [0, 4]  # "one" on its own, two seconds before "two"
    client.close()
