"""The served app (`python -m rollback_site.serve`, as `make run` and production serve it): its
start collects the static files when they are out of date; request bodies are bounded.

A body over ROLLBACK_MAX_REQUEST_BYTES is refused with 413 while it arrives, chunked or not, from
an anonymous client, and the server's memory does not grow with it (before, a 300 MB chunked
body grew daphne by 300 MB); a chunked body under the limit is read (before, it was read as
empty)."""

from __future__ import annotations

import json
import re
import socket
import sys
from collections.abc import Iterator

import httpx
import pytest

from tests.procs import Services, app_env, free_port, wait_until_answers

MB = 1024 * 1024
UPLOAD = 200 * MB
SETUP = "from accounts.models import User; User.objects.create_user('uploader')"


@pytest.fixture(scope="module")
def served(model_server, tmp_path_factory) -> Iterator[tuple[Services, str, str]]:
    tmp = tmp_path_factory.mktemp("served")
    env = app_env(tmp / "var", model_server.base_url)
    services = Services(tmp)
    try:
        services.prepare(env)
        _, key = services.setup_with_key(env, SETUP, "uploader")
        base = services.start_daphne(env)
        yield services, base, key
    finally:
        services.stop_all()


def peak_memory_mb(services: Services) -> int:
    """The served process's peak resident memory so far (VmHWM), in MB."""
    with open(f"/proc/{services.procs['daphne'].pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmHWM")


def read_response(sock: socket.socket) -> tuple[int, dict]:
    """The status and JSON body of the answer on `sock`."""
    sock.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data:
        got = sock.recv(65536)
        assert got, f"the connection closed after {data!r}"
        data += got
    head, body = data.split(b"\r\n\r\n", 1)
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        got = sock.recv(65536)
        assert got, "the connection closed inside the answer"
        body += got
    return int(head.split()[1]), json.loads(body)


def upload(base: str, size: int, *, chunked: bool) -> tuple[int, dict, int]:
    """POST `size` bytes, made as they are sent, to the import endpoint with no credentials;
    the answer, and how many bytes were sent before the server stopped reading."""
    host, port = base.removeprefix("http://").split(":")
    block = b"x" * (64 * 1024)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}"
    head = f"POST /api/v1/sessions/import/ HTTP/1.1\r\nHost: {host}\r\n{framing}\r\n"
    sent = 0
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(f"{head}Content-Type: application/json\r\n\r\n".encode())
        try:
            while sent < size:
                sock.sendall(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
                sent += len(block)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed the connection
        status, body = read_response(sock)
    return status, body, sent


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_an_oversized_body_is_refused_with_413_and_never_held_in_memory(served, chunked):
    services, base, _ = served
    before = peak_memory_mb(services)
    status, body, sent = upload(base, UPLOAD, chunked=chunked)
    assert status == 413
    assert "larger than the limit" in body["detail"]
    assert sent < UPLOAD  # cut off, not read to its end
    assert peak_memory_mb(services) - before < 30


def test_a_declared_oversized_body_is_refused_before_the_client_sends_it(served):
    _, base, _ = served
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            f"POST /api/v1/sessions/import/ HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Length: {UPLOAD}\r\nExpect: 100-continue\r\n\r\n".encode()
        )
        status, body = read_response(sock)
    assert status == 413  # not "100 Continue"
    assert "larger than the limit" in body["detail"]


def test_a_chunked_json_body_under_the_limit_is_read(served):
    _, base, key = served
    parts = [b'{"name": "sent in', b' chunks", "metadata": {"tags": ["a"]}}']
    response = httpx.post(
        f"{base}/api/v1/sessions/",
        content=iter(parts),  # an iterator: httpx sends it chunked, with no Content-Length
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert response.status_code == 201, response.text
    assert response.json()["name"] == "sent in chunks"
    assert response.json()["metadata"] == {"tags": ["a"]}


# --- The production start (DJANGO_DEBUG=0) collects the static files itself ------------------

PRODUCTION = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": "serve-test-only-not-a-secret-Vb7Qz2Lm9Rt4Wx8Kp3Nc6Yf5Jd1Hs",
    "DJANGO_SECURE_SSL_REDIRECT": "0",  # plain HTTP here; a TLS proxy stands in front in production
}


def start_serving(services: Services, env: dict[str, str], name: str) -> str:
    """`python -m rollback_site.serve` started and answering; its address. Collecting every
    static file (compressed twice each) takes a while on a busy machine: a bound of minutes."""
    port = free_port()
    cmd = [sys.executable, "-m", "rollback_site.serve", "-b", "127.0.0.1", "-p", str(port)]
    proc = services.start(name, cmd, env)
    wait_until_answers(f"http://127.0.0.1:{port}/accounts/login/", proc, timeout=240)
    return f"http://127.0.0.1:{port}"


def styled_page(base: str) -> str:
    """The login page, checked to be served with its stylesheet; the stylesheet's address."""
    page = httpx.get(f"{base}/accounts/login/")
    assert page.status_code == 200, page.text[:500]
    css = re.search(r'href="(/static/rollback/app\.[0-9a-f]{12}\.css)"', page.text)
    assert css, "the page names no hashed stylesheet"
    sheet = httpx.get(f"{base}{css[1]}")
    assert sheet.status_code == 200
    assert sheet.headers["content-type"].startswith("text/css")
    return css[1]


def test_the_production_start_on_a_fresh_checkout_serves_pages_with_their_css(
    model_server, tmp_path
):
    """`python -m rollback_site.serve` with DEBUG off, on a var dir where collectstatic never ran
    (a fresh checkout, the documented start): before, every page was a 500."""
    var = tmp_path / "var"
    env = app_env(var, model_server.base_url, **PRODUCTION)
    services = Services(tmp_path)
    try:
        services.manage(env, "migrate", "--noinput")  # and no collectstatic
        manifest = var / "staticfiles" / "staticfiles.json"
        assert not manifest.exists()
        base = start_serving(services, env, "daphne")
        stylesheet = styled_page(base)
        assert manifest.exists()
        made = manifest.stat().st_mtime_ns
        services.stop("daphne")

        # Started again with nothing changed: the files are up to date and nothing is written.
        base = start_serving(services, env, "daphne-again")
        assert styled_page(base) == stylesheet
        assert manifest.stat().st_mtime_ns == made
    finally:
        services.stop_all()


def test_a_socket_may_take_30_s_to_open_unless_the_command_line_says_otherwise():
    from rollback_site.serve import CONNECT_TIMEOUT_SECONDS, with_defaults

    assert CONNECT_TIMEOUT_SECONDS == 30  # daphne's own 5 s drops sockets a saturated host serves
    assert with_defaults(["-p", "8000"]) == ["--websocket_connect_timeout", "30", "-p", "8000"]
    assert with_defaults(["--websocket_connect_timeout", "9"]) == [
        "--websocket_connect_timeout",
        "9",
    ]
    assert with_defaults(["--websocket_connect_timeout=9"]) == ["--websocket_connect_timeout=9"]
