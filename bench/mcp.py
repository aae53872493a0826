"""A plain turn's cost with MCP servers configured (issue 36): no server, 4 healthy servers
(real MCP servers over streamable HTTP: tests.fakes.mcp_server, in this process), and the same 4
plus one that accepts connections and never answers, after its first failure (the breaker is
open: AGENT_MCP_BACKOFF_SECONDS is set past the run). The turn asks nothing of the tools: what
is measured is what configuring servers adds to every turn (the catalogue read from the rows,
the tools offered). `python -m bench.mcp VAR_DIR` is the process; `run_mcp` drives it."""

from __future__ import annotations

import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import DASH
from bench.runner import ROOT, System
from bench.turns import Turns

TOKEN = "bench-token"  # noqa: S105 - a local test server's token


class McpTurns(Turns):
    def __init__(self, var_dir: str) -> None:
        os.environ["AGENT_MCP_BACKOFF_SECONDS"] = "86400"
        os.environ["AGENT_MCP_TIMEOUT"] = "2"
        from tests.fakes.mcp_server import FakeMcpServer

        self.servers = [FakeMcpServer(token=TOKEN, name=f"s{i}").start() for i in range(4)]
        self.silent = socket.socket()
        self.silent.bind(("127.0.0.1", 0))
        self.silent.listen(64)
        super().__init__(var_dir)
        from agents.models import McpServer

        for i, server in enumerate(self.servers):
            McpServer.objects.create(
                name=f"healthy{i}",
                url=server.url,
                headers={"Authorization": f"Bearer {TOKEN}"},
                enabled=False,
            )
        port = self.silent.getsockname()[1]
        McpServer.objects.create(name="hung", url=f"http://127.0.0.1:{port}/mcp", enabled=False)

    def _configure(self, healthy: bool, hung: bool) -> None:
        from agents.models import McpServer

        McpServer.objects.filter(name__startswith="healthy").update(enabled=healthy)
        McpServer.objects.filter(name="hung").update(enabled=hung)

    def _turn(self, healthy: bool, hung: bool) -> dict[str, float]:
        """One plain turn: its wall time, and the CPU time this process spent on it (all its
        threads: the pool's that runs the turn included), which a loaded machine inflates far
        less than the wall time."""
        self._configure(healthy, hung)
        cpu = time.process_time()
        measured = self.api()
        measured["cpu_ms"] = (time.process_time() - cpu) * 1000
        return measured

    def none(self) -> dict[str, float]:
        return self._turn(False, False)

    def four(self) -> dict[str, float]:
        return self._turn(True, False)

    def hung(self) -> dict[str, float]:
        return self._turn(True, True)

    def first_failure(self) -> dict[str, float]:
        """The hung server's first turn: it costs its timeout, once."""
        return self.hung()


def main() -> None:
    from bench.common import serve

    turns = McpTurns(sys.argv[1])
    serve(
        {
            "none": turns.none,
            "four": turns.four,
            "hung": turns.hung,
            "first_failure": turns.first_failure,
            "quit": lambda: None,
        }
    )


def _spread(values: list[float]) -> str:
    return f"**{statistics.median(values):.1f} ms** ({min(values):.1f}{DASH}{max(values):.1f})"


def run_mcp(var: Path, *, rounds: int, smoke: bool) -> dict[str, Any]:
    var.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["PYTHONPATH"] = str(ROOT)
    system = System("mcp", "bench.mcp", str(var), env=env)
    samples: dict[str, list[float]] = {"none": [], "four": [], "hung": []}
    cpu: dict[str, list[float]] = {"none": [], "four": [], "hung": []}
    per_round = 3 if smoke else 10
    try:
        system.call("four")  # the healthy servers listed once: their catalogues cached
        first = system.call("first_failure")["ms"]
        for r in range(rounds):
            ops = ["none", "four", "hung"]
            ops = ops[r % 3 :] + ops[: r % 3]
            for _ in range(per_round):
                for op in ops:
                    measured = system.call(op)
                    samples[op].append(measured["ms"])
                    cpu[op].append(measured["cpu_ms"])
    finally:
        system.close()
    none, four, hung = (statistics.median(samples[k]) for k in ("none", "four", "hung"))
    cpu_none, cpu_four, cpu_hung = (statistics.median(cpu[k]) for k in ("none", "four", "hung"))
    markdown = "\n".join(
        [
            "## A plain turn with MCP servers configured (embedded, Django's test client, "
            '`"wait": true`)',
            "",
            f"{len(samples['none'])} samples each, interleaved; median (min{DASH}max). The hung "
            f"server's first turn took {first:.0f} ms (its 2 s timeout), once.",
            "",
            "| servers | whole turn | added to no server | CPU per turn | CPU added |",
            "| --- | --- | --- | --- | --- |",
            f"| none | {_spread(samples['none'])} | — | {cpu_none:.1f} ms | — |",
            f"| 4 healthy | {_spread(samples['four'])} | **{four - none:.1f} ms** | "
            f"{cpu_four:.1f} ms | {cpu_four - cpu_none:.1f} ms |",
            f"| 4 healthy + 1 hung (after its first failure) | {_spread(samples['hung'])} | "
            f"**{hung - none:.1f} ms** | {cpu_hung:.1f} ms | {cpu_hung - cpu_none:.1f} ms |",
            "",
            "CPU per turn: the median CPU time of the process that runs the turns (all its "
            "threads), which another load on the machine inflates far less than the wall time; "
            "the targets are on the wall time.",
        ]
    )
    return {
        "samples": samples,
        "cpu_samples": cpu,
        "markdown": markdown,
        "targets": [
            (
                "a plain turn with 4 healthy MCP servers ≤ 10 ms more than with none",
                f"{four - none:.1f} ms",
                four - none <= 10,
                "",
            ),
            (
                "with one hung MCP server, after its first failure, ≤ 10 ms more than with none",
                f"{hung - none:.1f} ms",
                hung - none <= 10,
                "",
            ),
        ],
    }


if __name__ == "__main__":
    main()
