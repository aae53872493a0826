"""The sandboxed shell's cost (issue 38): `run_shell("true")` over a workspace of 10 and of 500
files, and taking back what a command changed in 100 files, in process on SQLite (the service the
tool calls: the workspace read and written out, bubblewrap started and waited for, the folder read
back and removed, the changes stored as one write). The model's calls are not in it: this is what
the tool adds to a turn over the model. `python -m bench.sandbox VAR_DIR` is the process;
`run_sandbox` drives it."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import DASH
from bench.runner import ROOT, System
from bench.turns import Turns

SIZES = (10, 100, 500)
TOUCH_ALL = 'for f in f*.txt; do echo changed >> "$f"; done'


class SandboxRuns(Turns):
    def __init__(self, var_dir: str) -> None:
        super().__init__(var_dir)
        from sessions_app.models import Branch
        from sessions_app.services import session_create
        from workspace.services import files_apply

        self.branches: dict[int, Branch] = {}
        for n in SIZES:
            session = session_create(owner=self.user, name=f"{n} files")
            branch = Branch.objects.get(session=session, is_current=True)
            files_apply(
                branch=branch,
                writes={f"f{i:03d}.txt": f"file {i}\n" * 20 for i in range(n)},
                deletes=[],
            )
            self.branches[n] = branch

    def true(self, files: int) -> dict[str, float]:
        from sandbox.services import shell_run

        started = time.perf_counter()
        result = shell_run(branch=self.branches[files], command="true", timeout=30)
        ms = (time.perf_counter() - started) * 1000
        if result.exit_code != 0:
            raise RuntimeError(f"true failed: {result}")
        return {"ms": ms, "run_ms": result.seconds * 1000}

    def touch_all(self) -> dict[str, float]:
        """A command that changes each of the 100 files: the whole run, its command's part,
        and the take-back's write alone (measured apart, on the same changes)."""
        from sandbox.services import shell_run

        branch = self.branches[100]
        started = time.perf_counter()
        result = shell_run(branch=branch, command=TOUCH_ALL, timeout=30)
        ms = (time.perf_counter() - started) * 1000
        if len(result.changed) != 100:
            raise RuntimeError(f"the command changed {len(result.changed)} files, not 100")
        return {"ms": ms, "run_ms": result.seconds * 1000}

    def apply_100(self) -> dict[str, float]:
        """The take-back's write alone: 100 changed files as one step."""
        from workspace.services import files_apply

        branch = self.branches[100]
        stamp = time.perf_counter_ns()
        writes = {f"f{i:03d}.txt": f"file {i} at {stamp}\n" * 20 for i in range(100)}
        started = time.perf_counter()
        files_apply(branch=branch, writes=writes, deletes=[], by="agent")
        return {"ms": (time.perf_counter() - started) * 1000}


def main() -> None:
    from bench.common import serve

    runs = SandboxRuns(sys.argv[1])
    serve(
        {
            "true": runs.true,
            "touch_all": runs.touch_all,
            "apply_100": runs.apply_100,
            "quit": lambda: None,
        }
    )


def _spread(values: list[float]) -> str:
    return f"**{statistics.median(values):.1f} ms** ({min(values):.1f}{DASH}{max(values):.1f})"


def run_sandbox(var: Path, *, rounds: int, smoke: bool) -> dict[str, Any]:
    var.mkdir(parents=True, exist_ok=True)
    import os

    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["PYTHONPATH"] = str(ROOT)
    system = System("sandbox", "bench.sandbox", str(var), env=env)
    ops = ["true10", "true500", "touch", "apply"]
    samples: dict[str, list[float]] = {op: [] for op in ops}
    commands: dict[str, list[float]] = {op: [] for op in ops}
    per_round = 2 if smoke else 5
    try:
        system.call("true", files=10)  # bubblewrap's files in the page cache
        for r in range(rounds):
            order = ops[r % len(ops) :] + ops[: r % len(ops)]
            for _ in range(per_round):
                for op in order:
                    if op == "true10":
                        measured = system.call("true", files=10)
                    elif op == "true500":
                        measured = system.call("true", files=500)
                    elif op == "touch":
                        measured = system.call("touch_all")
                    else:
                        measured = system.call("apply_100")
                    samples[op].append(measured["ms"])
                    commands[op].append(measured.get("run_ms", 0.0))
    finally:
        system.close()
    med = {op: statistics.median(values) for op, values in samples.items()}
    cmd = {op: statistics.median(values) for op, values in commands.items()}
    markdown = "\n".join(
        [
            "## The sandboxed shell (`run_shell`, in process, SQLite)",
            "",
            f"{len(samples['true10'])} samples each, interleaved; median (min{DASH}max). The "
            "whole tool call as a turn runs it (the branch's files read, written out, bubblewrap "
            "started and waited for, the folder read back and removed, the changes stored as "
            "one write), the model's calls aside; \"the command\" is bubblewrap's own part, from "
            "its start to its end.",
            "",
            "| run | whole call | the command |",
            "| --- | --- | --- |",
            f"| `true`, 10 files | {_spread(samples['true10'])} | {cmd['true10']:.1f} ms |",
            f"| `true`, 500 files | {_spread(samples['true500'])} | {cmd['true500']:.1f} ms |",
            f"| a command changing each of 100 files | {_spread(samples['touch'])} | "
            f"{cmd['touch']:.1f} ms |",
            f"| the take-back's write alone: 100 changed files, one step | "
            f"{_spread(samples['apply'])} | — |",
        ]
    )
    taken = med["touch"] - cmd["touch"]
    return {
        "samples": samples,
        "command_samples": commands,
        "markdown": markdown,
        "targets": [
            (
                "a sandboxed `true` with 10 workspace files ≤ 50 ms over the model call",
                f"{med['true10']:.1f} ms",
                med["true10"] <= 50,
                "",
            ),
            (
                "a sandboxed `true` with 500 workspace files ≤ 150 ms over the model call",
                f"{med['true500']:.1f} ms",
                med["true500"] <= 150,
                "",
            ),
            (
                "taking back 100 changed files (stated)",
                f"{taken:.1f} ms around the command ({med['apply']:.1f} ms the write alone)",
                True,
                "",
            ),
        ],
    }


if __name__ == "__main__":
    main()
