"""The coordinator's side: each system runs in a process of its own (its imports, its database,
its memory), driven one command at a time, so that rounds interleave every system."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class BenchError(RuntimeError):
    pass


class System:
    """One system of the benchmark, in its own process."""

    def __init__(self, name: str, module: str, *args: str, env: dict[str, str] | None = None):
        self.name = name
        self.proc = subprocess.Popen(  # noqa: S603 (this interpreter, our modules)
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def call(self, op: str, **args: Any) -> Any:
        if self.proc.stdin is None or self.proc.stdout is None:
            raise BenchError(f"{self.name} has no pipes")
        self.proc.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise BenchError(f"{self.name} exited ({self.proc.wait()}) during {op}")
        answer = json.loads(line)
        if "error" in answer:
            raise BenchError(f"{self.name} failed {op}({args}):\n{answer['error']}")
        return answer["ok"]

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(BenchError, BrokenPipeError, OSError):
                self.call("quit")
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
