"""Published MCP servers (PyPI), installed by `make install` into .venv-mcp
(requirements/mcp.txt), through the admin-configured path: a McpServer row, a real turn with the
local model server calling the tool, the result stored. mcp-server-time and mcp-server-git over
stdio; mcp-proxy serving mcp-server-time over SSE and streamable HTTP."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import threading
from pathlib import Path

import pytest

from agents.models import McpServer
from sessions_app.models import Message
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

pytestmark = pytest.mark.django_db

BIN = Path(__file__).resolve().parents[2] / ".venv-mcp" / "bin"
if not (BIN / "mcp-server-time").exists():
    pytest.fail(".venv-mcp is missing: `make install` builds it", pytrace=False)


def results(turn) -> list[str]:
    rows = Message.objects.filter(branch_id=turn.branch_id, role="tool").order_by("position")
    return [m.content for m in rows]


def time_turn(fake_llm, session, name: str) -> str:
    fake_llm.queue(
        ToolCalls([ToolCall(f"{name}__get_current_time", {"timezone": "UTC"})]),
        Reply("It is now."),
    )
    turn = ask(session, "what time is it in UTC?")
    assert turn.status == "done"
    result = results(turn)[-1]  # the branch's last tool message: this turn's
    notices = [
        notice
        for meta in Message.objects.filter(branch_id=turn.branch_id).values_list(
            "metadata", flat=True
        )
        for notice in (meta or {}).get("notices", [])
    ]
    assert not notices, notices  # why a server's tools were left out of the turn
    return result


def children(name: str) -> list[int]:
    """The running child processes of this one whose command line holds `name`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, parent = stat.read_text().rsplit(")", 1)[1].split()[:2]
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(parent) == os.getpid() and state != "Z" and name.encode() in command:
            found.append(int(stat.parent.name))
    return found


def test_mcp_server_time_over_stdio(fake_llm, session):
    McpServer.objects.create(
        name="time", transport="stdio", command=str(BIN / "mcp-server-time"), timeout=30
    )
    result = time_turn(fake_llm, session, "time")
    assert '"timezone": "UTC"' in result


def test_mcp_server_time_is_one_process_kept_for_the_next_turns(fake_llm, session):
    McpServer.objects.create(
        name="time", transport="stdio", command=str(BIN / "mcp-server-time"), timeout=30
    )
    time_turn(fake_llm, session, "time")
    [process] = children("mcp-server-time")
    result = time_turn(fake_llm, session, "time")

    assert '"timezone": "UTC"' in result
    assert children("mcp-server-time") == [process]  # the same process answered


def test_mcp_server_git_over_stdio(fake_llm, session, tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # noqa: S603, S607
    McpServer.objects.create(
        name="git",
        transport="stdio",
        command=str(BIN / "mcp-server-git"),
        args=["--repository", str(tmp_path)],
        timeout=30,
    )
    fake_llm.queue(
        ToolCalls([ToolCall("git__git_status", {"repo_path": str(tmp_path)})]), Reply("Clean.")
    )
    turn = ask(session, "git status?")
    [result] = results(turn)
    assert "Repository status" in result or "On branch" in result


@pytest.fixture(scope="module")
def proxy():
    """mcp-proxy serving mcp-server-time on a local port (/sse and /mcp), the port its own server
    chose and logged: a port picked here and handed over could be taken meanwhile by another
    process, whose answers would then look like a broken proxy."""
    process = subprocess.Popen(  # noqa: S603 - the test venv's own program
        [
            str(BIN / "mcp-proxy"),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            str(BIN / "mcp-server-time"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    ports: queue.Queue[int | None] = queue.Queue()

    def read() -> None:  # to its end, so that the proxy never blocks on a full pipe
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if found := re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", line):
                ports.put(int(found[1]))
        ports.put(None)  # it ended

    threading.Thread(target=read, daemon=True).start()
    try:
        try:
            port = ports.get(timeout=60)
        except queue.Empty:
            port = None
        if port is None:
            pytest.fail("mcp-proxy did not start:\n" + "".join(lines[-20:]), pytrace=False)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize(("transport", "path"), [("sse", "/sse"), ("http", "/mcp")])
def test_mcp_server_time_through_mcp_proxy(fake_llm, session, proxy, transport, path):
    McpServer.objects.create(name="ptime", transport=transport, url=proxy + path, timeout=30)
    result = time_turn(fake_llm, session, "ptime")
    assert '"timezone": "UTC"' in result
