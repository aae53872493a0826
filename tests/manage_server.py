"""A long-lived `manage.py` for the tests: one Python process per environment that runs
management commands one after another, each as `manage.py ARGS` would run it in a fresh process.

A process of the app costs ~2.8 s of CPU to start Django; the end-to-end tests alone ran ~45
`manage.py shell -c` processes on the same database. `ManageServer` starts the process once (at
its first command, again if it has died) and hands it each command over a pipe; the child runs
it with Django's own command-line entry (`execute_from_command_line`: the same parsing, checks,
CommandError handling and exit status) and answers with its exit status. What the command writes
on its standard output and error goes, at the level of file descriptors, to files the parent
named, so nothing the command prints (nor a library writing to fd 1) can reach the protocol,
which runs on copies of the original stdin and stdout.

What a fresh process would not have is dropped after every command: the database connections
(and PostgreSQL pools), so a database stopped, restarted or written by another process is seen
afresh; the contents of Django's local-memory caches (never a shared Redis cache's: only the
clients are forgotten); the cache and channel-layer objects; the activated language and time
zone; changes to the environment, the working directory, sys.argv and sys.stdout/stderr. A
command that leaves a thread running (a turn dispatched in the embedded mode starts the recovery
thread) retires the process: it answers once its threads end, as a process would exit, and the
next command starts a new one. The one thread allowed to stay is core.bridge's event loop, idle
between calls, which any process keeps once it has published an event. Commands run one at a
time: a second caller waits for the first.

Run as `python -m tests.manage_server` (from the checkout, so `tests.` modules import as they do
under manage.py); the parent side is `ManageServer`, used by tests.procs.Services.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 180.0  # as tests.procs.manage's subprocess.run


class ManageServer:
    """The parent's side: one long-lived `manage.py` process of `env`, its stray output (what
    it writes between commands) appended to `log_path`."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env = env
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._lock = threading.Lock()
        self._dir = Path(tempfile.mkdtemp(prefix="manage-server-"))

    def run(self, *args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
        """`manage.py ARGS` run to its end: its exit status, standard output and error."""
        with self._lock:
            return self._run(args, timeout)

    def _run(self, args: tuple[str, ...], timeout: float) -> subprocess.CompletedProcess[str]:
        out, err = self._dir / "stdout", self._dir / "stderr"
        request = json.dumps({"args": list(args), "stdout": str(out), "stderr": str(err)})
        proc = self._send(request.encode() + b"\n")
        reply = self._reply(proc, timeout, args)
        if reply is None:  # the process died during the command, as a fresh one might
            returncode = proc.wait(10)
            self.proc = None
        else:
            returncode = reply["returncode"]
            if reply["retire"]:
                self._end(proc)
        return subprocess.CompletedProcess(["manage.py", *args], returncode, _read(out), _read(err))

    def stop(self) -> None:
        """End the process (an end of input ends its loop) and remove its files."""
        with self._lock:
            if self.proc is not None:
                self._end(self.proc)
        shutil.rmtree(self._dir, ignore_errors=True)

    def _start(self) -> subprocess.Popen[bytes]:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.manage_server"],
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        self.starts += 1
        return self.proc

    def _send(self, request: bytes) -> subprocess.Popen[bytes]:
        """Hand `request` to the live process, started anew if there is none (a test may have
        killed it, or the last command retired it)."""
        for attempt in range(2):
            proc = self.proc
            if proc is None or proc.poll() is not None:
                proc = self._start()
            assert proc.stdin is not None
            try:
                proc.stdin.write(request)
                proc.stdin.flush()
                return proc
            except BrokenPipeError:  # it died since the poll
                proc.wait(10)
                self.proc = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _reply(
        self, proc: subprocess.Popen[bytes], timeout: float, args: tuple[str, ...]
    ) -> dict[str, Any] | None:
        """The answer to the command just sent; None if the process ended first. Past `timeout`
        the process is killed, and TimeoutExpired raised as subprocess.run raises it."""
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            proc.kill()
            proc.wait(10)
            self.proc = None
            raise subprocess.TimeoutExpired(["manage.py", *args], timeout)
        line = proc.stdout.readline()
        return json.loads(line) if line else None

    def _end(self, proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if self.proc is proc:
            self.proc = None


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return ""


# --- The child's side --------------------------------------------------------------------------


def main() -> None:
    # The protocol keeps the pipes; the commands get no input, and what is written between
    # commands goes to standard error (the parent's log).
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rollback_site.settings")
    setup_error = _setup()
    for line in requests:
        request = json.loads(line)
        if setup_error is not None:
            Path(request["stderr"]).write_text(setup_error)
            Path(request["stdout"]).write_text("")
            _answer(answers, 1, retire=True)
            return
        before = set(threading.enumerate())
        returncode = _run(request)
        _forget_process_state()
        if _left_running(before):
            # Answered once the command's threads have ended, after the interpreter's exit
            # has joined them: the parent then starts a new process for the next command.
            atexit.register(_answer, answers, returncode, retire=True)
            return
        _answer(answers, returncode, retire=False)


def _setup() -> str | None:
    """django.setup(), as manage.py does it; the traceback if it fails (every command then
    fails with it, as a fresh process would)."""
    try:
        import django

        django.setup()
    except BaseException:
        return traceback.format_exc()
    return None


def _answer(answers: int, returncode: int, *, retire: bool) -> None:
    os.write(answers, json.dumps({"returncode": returncode, "retire": retire}).encode() + b"\n")


def _run(request: dict[str, Any]) -> int:
    """Run `manage.py ARGS` with fds 1 and 2 on the request's files; its exit status."""
    from django.core.management import execute_from_command_line

    environ, cwd, argv, streams = dict(os.environ), os.getcwd(), sys.argv, (sys.stdout, sys.stderr)
    sys.argv = ["manage.py", *request["args"]]
    with _output_to(request["stdout"], 1, sys.stdout), _output_to(request["stderr"], 2, sys.stderr):
        try:
            execute_from_command_line(sys.argv)
            returncode = 0
        except SystemExit as exc:
            returncode = _exit_status(exc.code)
        except BaseException:
            traceback.print_exc()
            returncode = 1
        finally:
            sys.stdout, sys.stderr = streams
    sys.argv = argv
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(environ)
    return returncode


def _exit_status(code: object) -> int:
    """What the process's exit status would have been for sys.exit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)  # as the interpreter prints a non-numeric exit value
    return 1


@contextlib.contextmanager
def _output_to(path: str, fd: int, stream: IO[str]) -> Iterator[None]:
    """File descriptor `fd` (and so `stream`, and anything else writing to it) on `path`."""
    saved = os.dup(fd)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    stream.flush()
    os.dup2(target, fd)
    os.close(target)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            stream.flush()
        os.dup2(saved, fd)
        os.close(saved)


def _forget_process_state() -> None:
    """Drop what a fresh process would not have: connections, local caches and their
    objects, the channel layers, the activated language and time zone."""
    from channels.layers import channel_layers
    from django.contrib.contenttypes.models import ContentType
    from django.core.cache import caches
    from django.core.cache.backends import locmem
    from django.db import connections
    from django.utils import timezone, translation

    for connection in connections.all(initialized_only=True):
        connection.close()
        # PostgreSQL's pool (core.postgres) outlives close(); a fresh process has none.
        if connection.alias in getattr(connection, "_connection_pools", {}):
            connection.close_pool()
    # Every local-memory cache's contents (the module's stores, which any LocMemCache object,
    # held anywhere, reads); a Redis cache's clients are only forgotten, its data is shared.
    for store in (*locmem._caches.values(), *locmem._expire_info.values()):
        store.clear()
    for alias in caches:
        if hasattr(caches._connections, alias):  # made in this process
            caches[alias].close()
            del caches[alias]
    channel_layers.backends.clear()
    ContentType.objects.clear_cache()
    translation.deactivate()
    timezone.deactivate()


def _left_running(before: set[threading.Thread]) -> bool:
    """Whether the command left a thread running that a process's exit would have ended or
    waited for (core.bridge's idle loop excepted); said on standard error (the log) if so."""
    from core.bridge import THREAD_NAME

    left = [
        thread.name
        for thread in threading.enumerate()
        if thread not in before and thread.is_alive() and thread.name != THREAD_NAME
    ]
    if left:
        print(f"manage_server: threads left running {left}: this process ends", file=sys.stderr)
    return bool(left)


if __name__ == "__main__":
    main()
