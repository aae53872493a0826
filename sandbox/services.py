"""One run of a command over a branch's workspace: written out, run, read back, taken back.

`shell_run` writes the branch's workspace as it stands into a fresh folder, runs the command
there (sandbox.runner), and makes every file it created, changed or deleted a new version of
the workspace in one step (workspace.services.files_apply), in the turn's name: a restore undoes
it like any write of the agent, and a turn that does not end well drops it with its messages.
Whatever happens, the folder is removed.

A worker runs at most SANDBOX_PER_WORKER commands at once, and one session one at a time: a
second command of a session that is still running one is refused at once (two calls of one turn
side by side would each take back over the other's files).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings

from core.errors import DomainError, InvalidInput
from workspace.selectors import blob_contents, workspace_files
from workspace.services import files_apply

from . import folders, network, runner

if TYPE_CHECKING:
    from sessions_app.models import Branch, Turn

COMMAND_MAX_CHARS = 10_000
# How long a command waits for a free sandbox of this worker before it is refused.
SLOT_WAIT_SECONDS = 30.0

_running: set[int] = set()
_running_lock = threading.Lock()
_slots: tuple[int, threading.BoundedSemaphore] | None = None
_slots_lock = threading.Lock()


class ShellRefused(InvalidInput):
    """The command was not run (no sandbox free, one already running for the session...)."""


@dataclass
class ShellResult:
    """A run as the tool reports it (agents.shell_tools.result_json)."""

    command: str
    ended: runner.Ended
    exit_code: int | None
    stdout: str
    stderr: str
    stdout_cut: int
    stderr_cut: int
    seconds: float
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    not_kept: list[tuple[str, str]] = field(default_factory=list)
    # Why nothing it changed was kept (a storage quota, a turn stopped meanwhile), else "".
    not_taken: str = ""
    # Its network, when it had one (sandbox.network): the mode, and with hosts the ones it
    # reached and those it was refused.
    network: dict[str, object] | None = None


def _slots_of_worker() -> threading.BoundedSemaphore:
    global _slots
    size = settings.SANDBOX_PER_WORKER
    with _slots_lock:
        if _slots is None or _slots[0] != size:
            _slots = (size, threading.BoundedSemaphore(size))
        return _slots[1]


def clean_command(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ShellRefused("Give the command to run, e.g. `ls -la` or `python3 test.py`.")
    if "\x00" in value:
        raise ShellRefused("A command cannot hold a NUL character.")
    if len(value) > COMMAND_MAX_CHARS:
        raise ShellRefused(f"A command may hold at most {COMMAND_MAX_CHARS:,} characters.")
    return value


def clean_timeout(value: object) -> float | None:
    if value is None or value == "":
        return None
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ShellRefused("The timeout is a number of seconds, e.g. 30.") from None
    if not seconds > 0:
        raise ShellRefused("The timeout is a number of seconds above 0, e.g. 30.")
    return seconds


def shell_run(
    *,
    branch: Branch,
    command: object,
    timeout: object = None,
    turn: Turn | None = None,
    stop: Callable[[], bool] = lambda: False,
    by: str = "agent",
    tool: str = "run_shell",
    on_output: Callable[[bytes], None] | None = None,
) -> ShellResult:
    """Run `command` over `branch`'s workspace (module docstring). ShellRefused when it is not
    run; what the command itself does (fails, times out, writes too much) is in the result.
    `on_output`: the output as it comes (sandbox.runner), to show it live."""
    text = clean_command(command)
    limits = runner.Limits.from_settings(clean_timeout(timeout))
    session_id = branch.session_id
    with _running_lock:
        if session_id in _running:
            raise ShellRefused(
                "Another command of this session is still running: wait for its result first."
            )
        _running.add(session_id)
    try:
        slots = _slots_of_worker()
        if not slots.acquire(timeout=SLOT_WAIT_SECONDS):
            raise ShellRefused(
                "Every sandbox of this worker is busy (SANDBOX_PER_WORKER): try again shortly."
            )
        try:
            return _run(branch, text, limits, turn, stop, by, tool, on_output)
        finally:
            slots.release()
    finally:
        with _running_lock:
            _running.discard(session_id)


def _run(
    branch: Branch,
    command: str,
    limits: runner.Limits,
    turn: Turn | None,
    stop: Callable[[], bool],
    by: str,
    tool: str,
    on_output: Callable[[bytes], None] | None = None,
) -> ShellResult:
    files = workspace_files(branch)
    contents = blob_contents([f.blob for f in files])
    before = {f.path: contents[f.blob].raw for f in files}
    try:
        work = folders.write_out(before)
    except OSError as exc:  # no room left where runs are written (SANDBOX_DIR)
        raise ShellRefused(
            f"The sandbox could not write the workspace out ({exc.strerror}): the command did "
            "not run."
        ) from None
    mode = network.network_mode()
    proxy = None
    try:
        if mode == "hosts":
            proxy = network.RunProxy(network.allowed_hosts(), runner.launcher_uid())
        outcome = runner.run(work, command, limits, stop, on_output, proxy)
        taken = folders.take_back(work, before)
    finally:
        if proxy is not None:
            proxy.close()
        folders.remove(work)
    result = ShellResult(
        command=command,
        ended=outcome.ended,
        exit_code=outcome.exit_code,
        stdout=_text(outcome.stdout.data),
        stderr=_text(outcome.stderr.data) or outcome.error,
        stdout_cut=outcome.stdout.cut,
        stderr_cut=outcome.stderr.cut,
        seconds=round(outcome.seconds, 3),
        not_kept=taken.not_kept,
    )
    if mode != "none":
        result.network = {"mode": mode}
    if proxy is not None:
        result.network = {
            "mode": mode,
            "hosts": network.allowed_hosts(),
            "reached": proxy.contacts.reached,
            "refused": proxy.contacts.refused,
        }
    if taken.writes or taken.deletes:
        try:
            files_apply(
                branch=branch,
                writes=taken.writes,
                deletes=taken.deletes,
                turn=turn,
                by=by,
                metadata={"tool": tool},
            )
        except DomainError as exc:
            result.not_taken = exc.message
        else:
            result.changed = sorted(taken.writes)
            result.deleted = list(taken.deletes)
    return result


def _text(data: bytes) -> str:
    """Output as text: UTF-8 where it is, U+FFFD where it is not (binary output), no NUL."""
    return data.decode("utf-8", "replace").replace("\x00", "\ufffd")
