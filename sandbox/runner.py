"""One command under bubblewrap over a folder, bounded.

The command is `/bin/sh -c COMMAND` in a sandbox with no network (a network namespace of its
own, with nothing in it), its own PID, IPC, UTS and cgroup namespaces and a user namespace where
it runs as uid 65534, the system's folders read-only (/usr and the links or folders /bin, /lib...
beside it, the few /etc files programs need, and the operator's SANDBOX_READ_PATHS), a private
/proc and /dev, a /tmp of at most SANDBOX_TMP_BYTES in memory, no home (HOME=/tmp), an emptied
environment, and `WORKDIR` (the folder) as the only writable place on disk. bubblewrap itself
is started with an environment of two variables: its own process (PID 1 inside) keeps the one it
was started with, which /proc/1/environ shows the command.

Bounds: rlimits (set by util-linux's `prlimit` on bubblewrap, and inherited) on CPU seconds,
address space, open files and a written file's size; the processes of the run (RLIMIT_NPROC, set by
`prlimit` inside the sandbox, so the kernel counts it in the run's own user namespace: one run's
fork bomb never takes the processes of another run, or of anything else of the same uid, which a
limit set outside would share); a wall-clock deadline; and what it leaves in the folder (bytes and
entries), looked at every SCAN_SECONDS. Past any of them, or on `stop()`, bubblewrap is killed
(SIGKILL to its process group): `--die-with-parent` then kills the sandbox's PID 1, and with it
every process of the namespace, however it detached or whatever signals it ignores. Output: the
first `output_bytes` of stdout and of stderr are kept, the rest read and counted, so a command that
writes without end neither blocks nor grows this process. What is kept is also handed, as it comes
(at most every LIVE_SECONDS, both streams in the order read), to the caller's `on_output`, which
shows it live.

Run as root (a container's default), bubblewrap is started as uid 65534 (and the folder given to
it), so nothing runs with root's rights outside the namespaces either (root's processes are not
held to RLIMIT_NPROC at all).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from django.conf import settings

from workspace.validation import max_file_bytes

from . import network

WORKDIR = "/workspace"
SANDBOX_UID = 65534
SCAN_SECONDS = 0.2
READ_CHUNK = 65_536
# How often the output kept since the last time is handed to `on_output` while a run goes on.
LIVE_SECONDS = 0.3
# The /etc files programs read (the dynamic linker's cache, the alternatives' links, the zone).
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
             "/etc/localtime")  # fmt: skip
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
PATH = "/usr/local/bin:/usr/bin:/bin"
# Inside the sandbox, /tmp is its own tmpfs, never the host's.
SANDBOX_TMP = "/tmp"  # noqa: S108

Ended = Literal["exited", "timeout", "stopped", "disk", "files", "failed"]


@dataclass(frozen=True)
class Limits:
    """The bounds of one run (settings.SANDBOX_*; `seconds` the run's own timeout)."""

    seconds: float
    memory_bytes: int
    processes: int
    open_files: int
    output_bytes: int
    disk_bytes: int
    files: int
    file_bytes: int
    tmp_bytes: int
    read_paths: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, timeout: float | None = None) -> Limits:
        """The operator's bounds, with `timeout` (the model's, else SANDBOX_TIMEOUT_SECONDS)
        capped at SANDBOX_MAX_SECONDS."""
        wanted = settings.SANDBOX_TIMEOUT_SECONDS if timeout is None else float(timeout)
        return cls(
            seconds=max(0.1, min(wanted, settings.SANDBOX_MAX_SECONDS)),
            memory_bytes=settings.SANDBOX_MEMORY_BYTES,
            processes=settings.SANDBOX_MAX_PROCESSES,
            open_files=settings.SANDBOX_MAX_OPEN_FILES,
            output_bytes=settings.SANDBOX_MAX_OUTPUT_BYTES,
            disk_bytes=settings.SANDBOX_MAX_DISK_BYTES,
            files=settings.SANDBOX_MAX_FILES,
            # A file may grow past what the workspace keeps (a build's object file, a log read
            # back by the command itself), up to the disk bound.
            file_bytes=max(max_file_bytes(), settings.SANDBOX_MAX_DISK_BYTES),
            tmp_bytes=settings.SANDBOX_TMP_BYTES,
            read_paths=tuple(settings.SANDBOX_READ_PATHS),
        )


@dataclass(frozen=True)
class Output:
    """The start of one stream (at most the bound) and how many bytes it had in all."""

    data: bytes
    total: int

    @property
    def cut(self) -> int:
        return self.total - len(self.data)


@dataclass(frozen=True)
class Outcome:
    """How a run ended: `exit_code` (None when it was killed, or never started), why it ended,
    its output, and its wall time. `error` says why a run could not start."""

    ended: Ended
    exit_code: int | None
    stdout: Output
    stderr: Output
    seconds: float
    error: str = ""


def bwrap_argv(
    folder: Path, command: str, limits: Limits, proxy: network.RunProxy | None = None
) -> list[str]:
    """bubblewrap's arguments for `command` over `folder` (the module's docstring), with the
    network SANDBOX_NETWORK gives it (sandbox.network; `proxy`: the run's, for hosts)."""
    argv = [
        settings.SANDBOX_BWRAP,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--hostname",
        "sandbox",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for name in TOP_LEVEL:
        top = Path("/") / name
        if top.is_symlink():
            argv += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            argv += ["--ro-bind", str(top), str(top)]
    for path in ETC_FILES:
        argv += ["--ro-bind-try", path, path]
    for path in limits.read_paths:
        argv += ["--ro-bind-try", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(limits.tmp_bytes), "--tmpfs", SANDBOX_TMP]
    argv += ["--bind", str(folder), WORKDIR, "--chdir", WORKDIR, "--clearenv"]
    for name, value in (
        ("PATH", PATH),
        ("HOME", SANDBOX_TMP),
        ("TMPDIR", SANDBOX_TMP),
        ("LANG", "C.UTF-8"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
    ):
        argv += ["--setenv", name, value]
    argv += network.bwrap_network_args(proxy)
    argv += ["--", *_processes_argv(limits)]
    if proxy is not None:
        return [*argv, *network.wrapped(command)]
    return [*argv, "/bin/sh", "-c", command]


def launcher_uid() -> int | None:
    """The uid bubblewrap is started as: SANDBOX_UID when this process is root, else its own
    (None: no change)."""
    return SANDBOX_UID if os.geteuid() == 0 else None


def _prlimit_argv(limits: Limits) -> list[str]:
    """The bounds bubblewrap starts with (each process's: nothing shared between runs)."""
    cpu = max(1, int(limits.seconds) + 1)
    return [
        "prlimit",
        f"--cpu={cpu}",
        f"--as={limits.memory_bytes}",
        f"--nofile={limits.open_files}",
        f"--fsize={limits.file_bytes}",
        "--core=0",
        "--",
    ]


def _processes_argv(limits: Limits) -> list[str]:
    """The command's process bound, set inside the sandbox: the kernel counts RLIMIT_NPROC at
    each user namespace level, against the limit its creator had there, so the run's own
    namespace counts the run's processes alone, and bubblewrap (with no such limit) lets the
    levels above count nothing against it. Set outside, the bound would count every process of
    the uid, and a fork bomb in one run would leave another run unable to start a process."""
    return ["prlimit", f"--nproc={limits.processes}", "--"]


def run(
    folder: Path,
    command: str,
    limits: Limits,
    stop: Callable[[], bool],
    on_output: Callable[[bytes], None] | None = None,
    proxy: network.RunProxy | None = None,
) -> Outcome:
    """Run `command` over `folder` within `limits`; `stop()` (asked about every 0.1 s) ends it
    early; `on_output` gets the kept output as it comes; `proxy`: the run's (hosts mode). Never
    raises for what the command does; an OSError only if it cannot start."""
    uid = launcher_uid()
    started = time.monotonic()
    argv = _prlimit_argv(limits)
    argv += bwrap_argv(folder, command, limits, proxy)
    try:
        process = subprocess.Popen(  # noqa: S603 - our own argument list, no shell
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"PATH": PATH, "LANG": "C.UTF-8"},
            start_new_session=True,
            close_fds=True,
            user=uid,
            group=uid,
            extra_groups=[] if uid is not None else None,
        )
    except OSError as exc:
        empty = Output(b"", 0)
        return Outcome("failed", None, empty, empty, 0.0, f"The sandbox did not start: {exc}.")
    return _watch(process, folder, limits, stop, started, on_output)


def _watch(
    process: subprocess.Popen[bytes],
    folder: Path,
    limits: Limits,
    stop: Callable[[], bool],
    started: float,
    on_output: Callable[[bytes], None] | None = None,
) -> Outcome:
    """Read the output and watch the bounds until the process and its pipes are done."""
    if process.stdout is None or process.stderr is None:
        raise ValueError("the sandbox's process needs its stdout and stderr piped")
    fds = (process.stdout.fileno(), process.stderr.fileno())
    kept = {fd: bytearray() for fd in fds}
    totals = dict.fromkeys(fds, 0)
    selector = selectors.DefaultSelector()
    for fd in fds:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    ended: Ended | None = None
    deadline = started + limits.seconds
    next_scan = started + SCAN_SECONDS
    live = _Live(on_output, started)
    try:
        while selector.get_map() or process.poll() is None:
            live.hand_when_due()
            if ended is None:
                ended = _passed(folder, limits, stop, deadline, next_scan)
                if time.monotonic() >= next_scan:
                    next_scan = time.monotonic() + SCAN_SECONDS
                if ended is not None:
                    _kill(process)
            if not selector.get_map():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=0.1)
                continue
            for key, _ in selector.select(timeout=0.1):
                live.add(_read(key.fd, selector, kept, totals, limits.output_bytes))
        live.hand()
    finally:
        selector.close()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        if process.poll() is None:
            _kill(process)
            process.wait()
    out, err = (Output(bytes(kept[fd]), totals[fd]) for fd in fds)
    return Outcome(
        ended=ended or "exited",
        exit_code=process.returncode if ended is None else None,
        stdout=out,
        stderr=err,
        seconds=time.monotonic() - started,
    )


class _Live:
    """The kept output not yet handed to `on_output`: handed at most every LIVE_SECONDS, and
    once more at the end."""

    def __init__(self, on_output: Callable[[bytes], None] | None, started: float) -> None:
        self.on_output = on_output
        self.pending = bytearray()
        self.due = started + LIVE_SECONDS

    def add(self, data: bytes) -> None:
        if self.on_output is not None:
            self.pending += data

    def hand_when_due(self) -> None:
        if self.pending and time.monotonic() >= self.due:
            self.hand()
            self.due = time.monotonic() + LIVE_SECONDS

    def hand(self) -> None:
        if self.on_output is not None and self.pending:
            self.on_output(bytes(self.pending))
        self.pending.clear()


def _passed(
    folder: Path, limits: Limits, stop: Callable[[], bool], deadline: float, next_scan: float
) -> Ended | None:
    """Why the run must end now, if it must."""
    now = time.monotonic()
    if now >= deadline:
        return "timeout"
    if stop():
        return "stopped"
    if now >= next_scan:
        return _over_disk(folder, limits)
    return None


def _over_disk(folder: Path, limits: Limits) -> Ended | None:
    """ "disk" or "files" once what the folder holds passes a bound (the walk stops there)."""
    size = entries = 0
    pending = [str(folder)]
    while pending:
        try:
            scanned = os.scandir(pending.pop())
        except OSError:
            continue
        with scanned:
            for entry in scanned:
                entries += 1
                if entries > limits.files:
                    return "files"
                try:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    else:
                        size += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
                if size > limits.disk_bytes:
                    return "disk"
    return None


def _read(
    fd: int,
    selector: selectors.BaseSelector,
    kept: dict[int, bytearray],
    totals: dict[int, int],
    bound: int,
) -> bytes:
    """Read what the pipe has: the part of it that is kept (within the bound)."""
    try:
        chunk = os.read(fd, READ_CHUNK)
    except BlockingIOError:
        return b""
    except OSError:
        chunk = b""
    if not chunk:
        selector.unregister(fd)
        return b""
    totals[fd] += len(chunk)
    room = bound - len(kept[fd])
    if room <= 0:
        return b""
    kept[fd] += chunk[:room]
    return chunk[:room]


def _kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL to bubblewrap's process group: its sandbox dies with it (--die-with-parent)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
