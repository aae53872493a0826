"""The agent's sandboxed shell: `run_shell(command, timeout)` and `run_tests()`, offered only where
the sandbox is available (sandbox.availability).

A command runs over a copy of the agent's branch's workspace, with no network, and what it
changes in the files becomes the running turn's write (sandbox.services): its effect is
`workspace`, so it needs no approval and a restore undoes it. It runs on the turn's thread
within its own timeout, and a Stop or a take-over (the turn's hold) kills it within
TURN_STOP_POLL_SECONDS.

The result is JSON for the model: `exit_code` (null when it was killed), `ended` (`exited`,
`timeout`, `stopped`, `disk`, `files`, `failed`), `stdout` and `stderr` (bounded, with how many
bytes were cut), `changed_files`, `deleted_files`, `not_kept` (what it left that the workspace
does not keep, and why) and, when the workspace refused its changes, `not_taken`. A refusal
before it runs (no command, one still running) is a `✗ ` line, as every built-in tool's.
"""

from __future__ import annotations

import codecs
import json
import uuid
from typing import TYPE_CHECKING, Any

from core import events
from core.errors import DomainError
from core.model_choice import chosen_test_command
from sandbox.services import ShellResult, shell_run

if TYPE_CHECKING:
    from sessions_app.models import Branch, Turn

    from .turn_state import TurnState

NO_TEST_COMMAND = (
    "✗ This session has no test command yet. The user sets it in the session's settings "
    "(Test command, e.g. `python3 -m unittest`), or the API in its `metadata.settings."
    "test_command`; meanwhile run_shell can run the tests."
)
# The files not kept that a result names (the rest are counted).
NOT_KEPT_SHOWN = 20
ENDED_WHY = {
    "timeout": "It was killed at its timeout.",
    "stopped": "It was stopped (the turn was stopped or taken over).",
    "disk": "It was killed: what it wrote passed the sandbox's bound (SANDBOX_MAX_DISK_BYTES).",
    "files": "It was killed: it made more files than the sandbox allows (SANDBOX_MAX_FILES).",
    "failed": "The sandbox could not start.",
}


def result_json(result: ShellResult) -> str:
    body: dict[str, Any] = {
        "command": result.command,
        "exit_code": result.exit_code,
        "ended": result.ended,
        "seconds": result.seconds,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "changed_files": result.changed,
        "deleted_files": result.deleted,
    }
    if result.stdout_cut:
        body["stdout_cut_bytes"] = result.stdout_cut
    if result.stderr_cut:
        body["stderr_cut_bytes"] = result.stderr_cut
    if result.not_kept:
        shown = result.not_kept[:NOT_KEPT_SHOWN]
        body["not_kept"] = [{"path": p, "why": why} for p, why in shown]
        if len(result.not_kept) > len(shown):
            body["not_kept_more"] = len(result.not_kept) - len(shown)
    if result.not_taken:
        body["not_taken"] = result.not_taken
    if result.network is not None:
        body["network"] = result.network
    if result.ended in ENDED_WHY:
        body["note"] = ENDED_WHY[result.ended]
    return json.dumps(body, ensure_ascii=False)


class LiveOutput:
    """A run's output as it comes, sent to the turn's watchers as `tool.output` events (the page
    shows it in the running tool's line). Best effort: the whole output is in the result."""

    def __init__(self, turn: Turn, tool: str) -> None:
        self.session, self.turn, self.tool = turn.session_id, turn.pk, tool
        self.run = uuid.uuid4().hex[:12]
        self.sent = 0
        # A character split between two reads waits for its end.
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def __call__(self, data: bytes) -> None:
        text = self.decoder.decode(data)
        if not text:
            return
        events.tool_output(  # never fails the caller (core.events.bus)
            session=self.session,
            turn=self.turn,
            tool=self.tool,
            run=self.run,
            offset=self.sent,
            text=text,
        )
        self.sent += len(text)


class ShellTools:
    """The shell tools of an agent that works on one branch."""

    internal_session: Branch
    turn_state: TurnState | None

    def _shell(self, command: object, timeout: object, tool: str) -> str:
        state = self.turn_state
        turn: Turn | None = state.turn if state is not None else None
        try:
            result = shell_run(
                branch=self.internal_session,
                command=command,
                timeout=timeout,
                turn=turn,
                stop=(lambda: state.hold.lost) if state is not None else (lambda: False),
                tool=tool,
                on_output=LiveOutput(turn, tool) if turn is not None else None,
            )
        except DomainError as exc:
            return f"✗ {exc.message}"
        return result_json(result)

    def run_shell(self, command: str, timeout: int | None = None) -> str:
        """Run a shell command (sh -c) over this conversation's workspace files, in a sandbox
        with no network unless the operator allows some (the result's `network` then says
        which hosts: through HTTPS_PROXY, HTTPS only). Files it creates, changes or deletes
        become the workspace's new versions (a restore undoes them). Returns JSON: exit_code,
        stdout, stderr (bounded) and the changed files.

        Args:
            command: the command, e.g. "ls -la" or "python3 main.py".
            timeout: seconds before it is killed (optional; the operator's default and maximum
                apply).
        """
        return self._shell(command, timeout, "run_shell")

    def run_tests(self) -> str:
        """Run this session's test command (set by the user in the session's settings) over the
        workspace, in the same sandbox as run_shell. Returns the same JSON."""
        chosen = self.internal_session.session.settings
        try:
            command = chosen_test_command(chosen)
        except DomainError as exc:
            return f"✗ {exc.message}"
        if not command:
            return NO_TEST_COMMAND
        return self._shell(command, None, "run_tests")
