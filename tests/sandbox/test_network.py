"""The sandbox's network as an operator sets it (SANDBOX_NETWORK): none by default; a list of
hosts reached through the run's own proxy (HTTPS CONNECT to those hosts only, what was reached
and refused in the result); or all of the host's network. With any network a run is an
`external` effect: it waits for approval (unless SANDBOX_NETWORK_APPROVAL is off) and the
ledger keeps it. A real HTTP server on this host stands for the outside."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agents.rollback_agent import RollbackAgent
from agents.shell_tools import result_json
from agents.worker import run_turn
from sandbox import availability as availability_module
from sandbox.network import matched
from sandbox.services import shell_run
from sessions_app.models import LedgerEntry, Message, Turn
from sessions_app.selectors import current_branch
from tests.agents.test_approval_pause import answer
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

pytestmark = pytest.mark.django_db(transaction=True)

# A client inside the sandbox: a GET through HTTPS_PROXY with CONNECT (http.client's tunnel),
# printing the status and body, or the error.
FETCH = """python3 - <<'EOF'
import http.client, os
proxy = os.environ.get("HTTPS_PROXY", "")
host, port = "{host}", {port}
try:
    if proxy:
        p = proxy.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(p[0], int(p[1]), timeout=10)
        conn.set_tunnel(host, port)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=5)
    conn.request("GET", "/")
    r = conn.getresponse()
    print(r.status, r.read().decode())
except Exception as exc:
    print("failed:", exc)
EOF"""


class Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello from outside"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def outside():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def network(settings):
    """Sets SANDBOX_NETWORK (the availability is probed again for each value)."""

    def set_to(*value: str) -> None:
        settings.SANDBOX_NETWORK = list(value)
        availability_module._known.clear()

    yield set_to
    availability_module._known.clear()


def fetch(branch, host: str, port: int) -> dict:
    result = shell_run(branch=branch, command=FETCH.format(host=host, port=port), timeout=60)
    return json.loads(result_json(result))


def test_by_default_nothing_is_reached_and_the_run_is_a_workspace_effect(branch, outside):
    body = fetch(branch, "127.0.0.1", outside)
    assert body["stdout"].startswith("failed:")
    assert "network" not in body
    agent = RollbackAgent(branch.session_id, model=None, skip_session_creation=True)
    assert agent.tool_effects["run_shell"] == "workspace"
    assert "run_shell" not in agent.tool_approvals


def test_a_listed_host_is_reached_through_the_proxy_and_another_is_refused(
    branch, outside, network
):
    network(f"localhost:{outside}")
    body = fetch(branch, "localhost", outside)
    assert body["stdout"] == "200 hello from outside\n"
    assert body["network"] == {
        "mode": "hosts",
        "hosts": [f"localhost:{outside}"],
        "reached": [f"localhost:{outside}"],
        "refused": [],
    }

    refused = fetch(branch, "example.invalid", 443)
    assert refused["stdout"].startswith("failed: Tunnel connection failed: 403")
    assert refused["network"]["refused"] == ["example.invalid:443"]
    assert refused["network"]["reached"] == []

    # The namespace itself stays empty: a direct connection reaches nothing.
    direct = shell_run(
        branch=branch,
        command=(
            "python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
            f'{outside}), 3)" 2>&1 | tail -1'
        ),
    )
    assert "Network is unreachable" in direct.stdout or "refused" in direct.stdout


def test_the_proxy_takes_connect_only(branch, outside, network):
    network(f"localhost:{outside}")
    plain = shell_run(
        branch=branch,
        command='python3 -c "import urllib.request as u; '
        f"u.urlopen('http://localhost:{outside}/')\" 2>&1 | tail -1",
    )
    assert "405" in plain.stdout


def test_with_all_the_network_the_host_is_reached_directly(branch, outside, network):
    network("all")
    body = fetch(branch, "127.0.0.1", outside)
    assert body["stdout"] == "200 hello from outside\n"
    assert body["network"] == {"mode": "all"}


def test_with_a_network_a_run_waits_for_approval_and_enters_the_ledger(
    fake_llm, session, outside, network, settings
):
    network(f"localhost:{outside}")
    agent = RollbackAgent(session.pk, model=None, skip_session_creation=True)
    assert agent.tool_effects["run_shell"] == "external"
    assert {"run_shell", "run_tests"} <= agent.tool_approvals

    fake_llm.queue(
        ToolCalls(
            [ToolCall("run_shell", {"command": FETCH.format(host="localhost", port=outside)})]
        ),
        Reply("Fetched."),
    )
    turn = ask(session, "fetch it")
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert turn.pending_approval["tool_name"] == "run_shell"
    assert not LedgerEntry.objects.filter(session=session).exists()  # nothing ran yet

    fake_llm.queue(Reply("Fetched."))
    answer(turn, True, resume=False)
    run_turn(turn.pk)  # the continuation, as a worker runs it
    turn.refresh_from_db()
    assert turn.status == Turn.Status.DONE, turn.error
    [tool] = Message.objects.filter(branch__session=session, role="tool")
    assert json.loads(tool.tool_result)["stdout"] == "200 hello from outside\n"
    assert tool.effect == "external"
    [entry] = LedgerEntry.objects.filter(session=session)
    assert entry.tool_name == "run_shell"

    settings.SANDBOX_NETWORK_APPROVAL = False
    availability_module._known.clear()
    agent = RollbackAgent(session.pk, model=None, skip_session_creation=True)
    assert agent.tool_effects["run_shell"] == "external"
    assert "run_shell" not in agent.tool_approvals


def test_without_approval_a_networked_run_is_recorded_in_the_ledger(
    fake_llm, session, outside, network, settings
):
    network(f"localhost:{outside}")
    settings.SANDBOX_NETWORK_APPROVAL = False
    fake_llm.queue(
        ToolCalls(
            [ToolCall("run_shell", {"command": FETCH.format(host="localhost", port=outside)})]
        ),
        Reply("Fetched."),
    )
    turn = ask(session, "fetch it")
    assert turn.status == Turn.Status.DONE, turn.error
    [entry] = LedgerEntry.objects.filter(session=session)
    assert entry.tool_name == "run_shell"
    assert entry.branch_ref == current_branch(session).pk


@pytest.mark.parametrize(
    ("host", "port", "patterns", "allowed"),
    [
        ("pypi.org", 443, ["pypi.org"], True),
        ("pypi.org", 80, ["pypi.org"], True),
        ("pypi.org", 22, ["pypi.org"], False),
        ("PyPI.org.", 443, ["pypi.org"], True),
        ("evil-pypi.org", 443, ["pypi.org"], False),
        ("files.pythonhosted.org", 443, ["*.pythonhosted.org"], True),
        ("pythonhosted.org", 443, ["*.pythonhosted.org"], False),
        ("localhost", 8080, ["localhost:8080"], True),
        ("localhost", 443, ["localhost:8080"], False),
    ],
)
def test_which_hosts_a_list_allows(host, port, patterns, allowed):
    assert (matched(host, port, patterns) is not None) is allowed


@pytest.mark.parametrize("value", ["none,pypi.org", "http://pypi.org", "pypi.org:99999", "a b"])
def test_a_bad_network_setting_stops_the_start_saying_what_it_takes(value, monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from rollback_site.settings.env import Env

    monkeypatch.setenv("SANDBOX_NETWORK", value)
    with pytest.raises(ImproperlyConfigured, match="SANDBOX_NETWORK") as refused:
        Env.load()
    assert "give `none`, `all`, or hosts such as pypi.org" in str(refused.value)


def _resolving_to(ip: str):
    def getaddrinfo(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]

    return getaddrinfo


@pytest.mark.parametrize(
    ("ip", "pattern", "refused"),
    [
        ("10.1.2.3", "*.example.org", True),  # a subdomain pointed inside
        ("127.0.0.1", "*.example.org", True),
        ("169.254.169.254", "*.example.org", True),  # a cloud's metadata service
        ("93.184.215.14", "*.example.org", False),
        ("127.0.0.1", "localhost:8080", False),  # the operator named the place itself
        ("10.1.2.3", "10.1.2.3:443", False),
    ],
)
def test_a_listed_name_pointing_inside_is_refused(monkeypatch, ip, pattern, refused):
    from sandbox import network

    monkeypatch.setattr(network.socket, "getaddrinfo", _resolving_to(ip))
    address = network._address("host.example.org", 443, pattern)
    if refused:
        assert address == f"it resolves to {ip}, which is not a public address"
    else:
        assert address == (ip, 443)
