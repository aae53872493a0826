"""The sandbox's network, as the operator sets it (SANDBOX_NETWORK).

- `none` (the default): the command's network namespace has nothing but its own loopback.
- `all`: the host's network as it is (`--share-net`), with the files name resolution and TLS
  need; the command can reach whatever the worker can, the app's own ports and databases too.
- hosts (`pypi.org`, `*.pythonhosted.org`, `localhost:8080`; a host without a port means 443 and
  80): the namespace stays empty, and each run gets a proxy of its own (`RunProxy`), which the
  app starts on a Unix socket in a folder of its own, bound into the sandbox. Inside, a relay
  (`RELAY`, started before the command by the same shell, listening on 127.0.0.1:PROXY_PORT)
  carries each connection to that socket, and HTTP(S)_PROXY point at it, so pip, curl or
  Python's urllib use it. The proxy answers HTTP CONNECT to the listed hosts only (403 for
  another, 405 for anything but CONNECT, 502 when the host does not answer), resolves names
  itself (a listed name that resolves to a loopback or private address is refused, unless the
  operator listed such a place itself: `localhost`, an address), and records what the run
  reached and what it was refused, for its result.

With any network a run's effect is `external` (what it did outside is beyond any restore, so the
ledger keeps it) and each call waits for its owner's approval unless SANDBOX_NETWORK_APPROVAL is
off (agents.builtin_tools reads `network_mode` for both).
"""

from __future__ import annotations

import contextlib
import fnmatch
import ipaddress
import os
import selectors
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from django.conf import settings

Mode = Literal["none", "all", "hosts"]

PROXY_PORT = 3128  # the relay's, inside the sandbox
SOCKET_IN_SANDBOX = "/run/rollback-proxy/proxy.sock"
CONNECT_SECONDS = 10.0  # a host that does not answer within this is a 502
HEAD_SECONDS = 10.0  # a request's head must arrive within this
IDLE_SECONDS = 120.0  # a tunnel with nothing either way for this long is closed
HEAD_BYTES = 8192
MAX_TUNNELS = 32  # tunnels one run may hold open at once; more wait
MAX_RECORDED = 50  # hosts a result names, reached and refused each
# What name resolution and TLS need, bound read-only when the sandbox has a network.
NETWORK_ETC = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf",
               "/etc/ssl", "/etc/ca-certificates", "/etc/pki")  # fmt: skip


def network_mode() -> Mode:
    value = list(getattr(settings, "SANDBOX_NETWORK", ["none"]) or ["none"])
    if value == ["none"]:
        return "none"
    if value == ["all"]:
        return "all"
    return "hosts"


def allowed_hosts() -> list[str]:
    return list(settings.SANDBOX_NETWORK) if network_mode() == "hosts" else []


def matched(host: str, port: int, patterns: list[str]) -> str | None:
    """The pattern that lets `host:port` through (a name or `*.` wildcard, with a port or,
    without, 443 and 80), or None. Names are compared in lower case, without a trailing dot."""
    host = host.lower().rstrip(".")
    for pattern in patterns:
        name, _, wanted = pattern.partition(":")
        ports = {int(wanted)} if wanted else {443, 80}
        if port not in ports:
            continue
        if name.startswith("*."):
            if fnmatch.fnmatchcase(host, name) and host.count(".") >= name.count("."):
                return pattern
        elif host == name:
            return pattern
    return None


def _names_a_local_place(pattern: str) -> bool:
    """Whether the operator listed a local place itself: `localhost`, or an address."""
    name = pattern.partition(":")[0]
    if name == "localhost":
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _address(host: str, port: int, pattern: str) -> tuple[str, int] | str:
    """The address to connect to (resolved here, once, so that the name cannot point elsewhere
    between the check and the connection), or why not. A name the operator listed that resolves
    to a loopback, private, link-local or reserved address is refused, unless the listed name is
    such a place itself (`localhost`, an address): a wildcard's subdomain could point anywhere."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"its name does not resolve ({exc.strerror or exc})"
    for _family, _type, _proto, _name, address in found:
        ip = ipaddress.ip_address(address[0])
        local = not ip.is_global
        if local and not _names_a_local_place(pattern):
            return f"it resolves to {ip}, which is not a public address"
        return str(ip), port
    return "its name does not resolve"


def bwrap_network_args(proxy: RunProxy | None) -> list[str]:
    """bubblewrap's arguments for the network mode (after `--unshare-all`)."""
    mode = network_mode()
    if mode == "none":
        return []
    argv: list[str] = []
    for path in NETWORK_ETC:
        argv += ["--ro-bind-try", path, path]
    if mode == "all":
        return ["--share-net", *argv]
    if proxy is None:
        raise ValueError("a sandbox with hosts needs its run's proxy")
    argv += ["--bind", str(proxy.folder), str(Path(SOCKET_IN_SANDBOX).parent)]
    address = f"http://127.0.0.1:{PROXY_PORT}"
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        argv += ["--setenv", name, address]
    argv += ["--setenv", "ROLLBACK_RELAY", RELAY]
    return argv


def wrapped(command: str) -> list[str]:
    """The shell's arguments for `command` in the hosts mode: the relay first (it returns once
    it listens), then the command, as the shell's `$0`."""
    script = (
        'python3 -c "$ROLLBACK_RELAY" || { echo "The sandbox\'s network relay did not start." >&2;'
        ' exit 125; }; unset ROLLBACK_RELAY; exec /bin/sh -c "$0"'
    )
    return ["/bin/sh", "-c", script, command]


# The relay inside the sandbox: it listens on 127.0.0.1:PROXY_PORT, then forks and returns, so
# the command starts once it can connect; the child carries each connection to the proxy's
# socket, both ways, until either side closes.
RELAY = f"""
import os, socket, threading
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", {PROXY_PORT}))
listener.listen(64)
if os.fork():
    os._exit(0)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)

def pump(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

def serve(client):
    upstream = socket.socket(socket.AF_UNIX)
    try:
        upstream.connect({SOCKET_IN_SANDBOX!r})
    except OSError:
        client.close()
        return
    threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
    pump(client, upstream)

while True:
    client, _ = listener.accept()
    threading.Thread(target=serve, args=(client,), daemon=True).start()
"""


@dataclass
class Contacts:
    """What a run's commands reached through the proxy, and what they were refused."""

    reached: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def note(self, into: list[str], what: str) -> None:
        if what not in into and len(into) < MAX_RECORDED:
            into.append(what)


class RunProxy:
    """One run's proxy: a Unix socket in a folder of its own (given to the sandbox's uid when
    this process is root), serving until `close`."""

    def __init__(self, patterns: list[str], sandbox_uid: int | None = None) -> None:
        self.patterns = patterns
        self.contacts = Contacts()
        self.folder = Path(tempfile.mkdtemp(prefix="rollback-proxy-"))
        self.path = self.folder / Path(SOCKET_IN_SANDBOX).name
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(self.path))
        self.listener.listen(64)
        self.listener.settimeout(0.2)
        # The sandbox's uid alone may reach it: this process's own, or (when root) the one
        # bubblewrap is started as.
        os.chmod(self.path, 0o600)
        if sandbox_uid is not None:
            os.chown(self.folder, sandbox_uid, sandbox_uid)
            os.chown(self.path, sandbox_uid, sandbox_uid)
        self.slots = threading.BoundedSemaphore(MAX_TUNNELS)
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._accept, name="sandbox-proxy", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.closed.set()
        self.thread.join(timeout=2)
        self.listener.close()
        with self.lock:
            for sock in list(self.open):
                with contextlib.suppress(OSError):
                    sock.close()
            self.open.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(
                target=self._serve, args=(client,), name="sandbox-tunnel", daemon=True
            ).start()

    def _keep(self, sock: socket.socket) -> None:
        with self.lock:
            self.open.add(sock)

    def _serve(self, client: socket.socket) -> None:
        if not self.slots.acquire(timeout=IDLE_SECONDS):
            client.close()
            return
        self._keep(client)
        upstream: socket.socket | None = None
        try:
            upstream = self._open(client)
            if upstream is not None:
                self._keep(upstream)
                _pump(client, upstream, self.closed)
        except OSError:
            pass
        finally:
            self.slots.release()
            for sock in (client, upstream):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()
                    with self.lock:
                        self.open.discard(sock)

    def _open(self, client: socket.socket) -> socket.socket | None:
        """The request's tunnel, opened (the client told so), or None (the client told why)."""
        head = _head(client)
        parts = head.split(b"\r\n", 1)[0].split() if head else []
        if len(parts) != 3 or parts[0] != b"CONNECT":
            _answer(client, 405, "Only HTTPS (CONNECT) goes through the sandbox's proxy.")
            return None
        target = parts[1].decode("ascii", "replace")
        host, _, port_text = target.rpartition(":")
        host = host.strip("[]")
        if not host or not port_text.isdigit():
            _answer(client, 400, f"{target} is not host:port.")
            return None
        port = int(port_text)
        pattern = matched(host, port, self.patterns)
        if pattern is None:
            self.contacts.note(self.contacts.refused, target)
            _answer(client, 403, f"{target} is not among the sandbox's hosts (SANDBOX_NETWORK).")
            return None
        address = _address(host, port, pattern)
        if isinstance(address, str):
            self.contacts.note(self.contacts.refused, target)
            _answer(client, 403, f"{target} is refused: {address}.")
            return None
        try:
            upstream = socket.create_connection(address, timeout=CONNECT_SECONDS)
        except OSError as exc:
            self.contacts.note(self.contacts.refused, target)
            _answer(client, 502, f"{target} did not answer: {exc.strerror or exc}.")
            return None
        self.contacts.note(self.contacts.reached, target)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        return upstream


def _head(client: socket.socket) -> bytes:
    """A request's head (up to its blank line), within HEAD_SECONDS and HEAD_BYTES."""
    client.settimeout(HEAD_SECONDS)
    head = b""
    try:
        while b"\r\n\r\n" not in head and len(head) < HEAD_BYTES:
            chunk = client.recv(HEAD_BYTES - len(head))
            if not chunk:
                break
            head += chunk
    except OSError:
        return b""
    return head if b"\r\n\r\n" in head else b""


def _answer(client: socket.socket, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 405: "Method Not Allowed"}.get(
        status, "Bad Gateway"
    )
    body = (text + "\n").encode()
    with contextlib.suppress(OSError):
        client.sendall(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )


def _pump(a: socket.socket, b: socket.socket, closed: threading.Event) -> None:
    """Carry bytes both ways until either side closes, nothing moves for IDLE_SECONDS, or the
    run ends."""
    a.setblocking(False)
    b.setblocking(False)
    other = {a: b, b: a}
    with selectors.DefaultSelector() as selector:
        selector.register(a, selectors.EVENT_READ)
        selector.register(b, selectors.EVENT_READ)
        idle = 0.0
        while not closed.is_set():
            ready = selector.select(timeout=0.5)
            if not ready:
                idle += 0.5
                if idle >= IDLE_SECONDS:
                    return
                continue
            idle = 0.0
            for key, _ in ready:
                source = key.fileobj
                if not isinstance(source, socket.socket):
                    continue
                try:
                    data = source.recv(65536)
                except BlockingIOError:
                    continue
                if not data:
                    return
                target = other[source]
                target.setblocking(True)
                target.settimeout(IDLE_SECONDS)
                target.sendall(data)
                target.setblocking(False)
