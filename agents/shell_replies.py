"""A result of `run_shell` or `run_tests` (agents.shell_tools) as people are shown it: parsed once
(`shell_view`), as the chat page's terminal block and as the demo model's reply (the command and
its output in a code block, its exit code, the files it changed)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


@dataclass(frozen=True)
class ShellView:
    """A run_shell or run_tests result (agents.shell_tools.result_json) as people are shown it:
    by the demo's reply and by the chat page's terminal block."""

    command: str
    output: str  # stdout, then stderr
    exit_code: int | None
    note: str
    seconds: float | None
    cut: int  # bytes of output not kept
    changed: list[str]
    deleted: list[str]
    not_kept: list[dict[str, Any]]
    not_taken: str


def shell_view(result: object) -> ShellView | None:
    """None for anything that is not a run's JSON (a refusal's `✗ ` line)."""
    try:
        body = json.loads(result) if isinstance(result, str) else None
    except ValueError:
        return None
    if not isinstance(body, dict) or "command" not in body:
        return None
    return ShellView(
        command=str(body["command"]),
        output="\n".join(
            str(part).rstrip("\n") for part in (body.get("stdout"), body.get("stderr")) if part
        ),
        exit_code=body.get("exit_code"),
        note=str(body.get("note") or ""),
        seconds=body.get("seconds"),
        cut=int(body.get("stdout_cut_bytes") or 0) + int(body.get("stderr_cut_bytes") or 0),
        changed=[p for p in body.get("changed_files") or [] if isinstance(p, str)],
        deleted=[p for p in body.get("deleted_files") or [] if isinstance(p, str)],
        not_kept=[n for n in body.get("not_kept") or [] if isinstance(n, dict)],
        not_taken=str(body.get("not_taken") or ""),
    )


def shell_reply(result: str) -> str | None:
    """None for a refusal (a `✗ ` line), which the demo hands on in the user's words."""
    run = shell_view(result)
    if run is None:
        return None
    block = f"$ {run.command}\n{run.output}".rstrip("\n")
    fence = _fence(block)
    lines = [f"{fence}console\n{block}\n{fence}"]
    lines.append(
        f"Exit code {run.exit_code}." if run.exit_code is not None else run.note or "Killed."
    )
    if run.changed or run.deleted:
        lines.append(
            "Files changed: " + ", ".join(f"`{p}`" for p in run.changed + run.deleted) + "."
        )
    for item in run.not_kept:
        lines.append(f"Not kept: `{item.get('path')}` ({item.get('why')}).")
    if run.not_taken:
        lines.append(f"Nothing it changed was kept: {run.not_taken}")
    return "\n\n".join(lines)
