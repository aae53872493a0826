"""`python -m bench [--smoke] [--rounds N] [--out DIR]`: run every benchmark, write
DIR/latest.md, DIR/latest.json and the plots. See bench/__init__.py."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.runner import ROOT, System

FULL_SIZES = [10, 100, 1_000, 10_000]
SMOKE_SIZES = [10, 40]
# A (system, benchmark, size) whose samples already took this long stops at MIN_ROUNDS rounds
# (agno's fork_session at 10,000 messages takes seconds a call).
SLOW_BUDGET_MS = 20_000
MIN_ROUNDS = 3

STORE_BENCHES = {
    # benchmark: the systems that have it
    "checkpoint": ["rollback-sqlite", "rollback-postgres", "langgraph", "seed"],
    "restore": ["rollback-sqlite", "rollback-postgres", "langgraph", "agno", "seed"],
    # The same with a 500-file workspace (the two above carry a 10-file one).
    "checkpoint_500": ["rollback-sqlite", "rollback-postgres"],
    "restore_500": ["rollback-sqlite", "rollback-postgres"],
    "read": ["rollback-sqlite", "rollback-postgres", "langgraph", "agno", "seed"],
    "read_orm": ["rollback-sqlite", "rollback-postgres"],
    "window": ["rollback-sqlite", "rollback-postgres"],
    "deep_read": ["rollback-sqlite", "rollback-postgres"],
    "deep_window": ["rollback-sqlite", "rollback-postgres"],
    "page": ["rollback-sqlite", "rollback-postgres"],
    "export": ["rollback-sqlite", "rollback-postgres"],
}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update({"AGNO_TELEMETRY": "false", "PYTHONPATH": str(ROOT), **extra})
    return env


def _systems(var: Path, engines: list[str]) -> dict[str, System]:
    systems: dict[str, System] = {}
    for engine in engines:
        systems[f"rollback-{engine}"] = System(
            f"rollback-{engine}", "bench.rollback_store", engine, str(var / engine), env=_env()
        )
    for peer in ("langgraph", "agno", "seed"):
        systems[peer] = System(peer, "bench.peers", peer, str(var / peer), env=_env())
    return systems


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_store(systems: dict[str, System], sizes: list[int], rounds: int) -> dict[str, Any]:
    for size in sizes:
        for system in systems.values():
            started = time.monotonic()
            system.call("prepare", size=size)
            _log(f"prepared {system.name} at {size} in {time.monotonic() - started:.1f} s")
    samples: dict[str, dict[str, dict[str, list[dict[str, float]]]]] = {}
    spent: dict[tuple[str, str, int], float] = {}
    for r in range(rounds):
        started = time.monotonic()
        for bench, names in STORE_BENCHES.items():
            for size in sizes:
                present = [n for n in names if n in systems]
                shift = r % len(present)
                for name in present[shift:] + present[:shift]:  # a different order each round
                    key = (name, bench, size)
                    got = (
                        samples.setdefault(bench, {}).setdefault(name, {}).setdefault(str(size), [])
                    )
                    if spent.get(key, 0.0) > SLOW_BUDGET_MS and len(got) >= MIN_ROUNDS:
                        continue
                    result = systems[name].call(bench, size=size)
                    spent[key] = spent.get(key, 0.0) + result.get("ms", 0.0)
                    got.append(result)
        _log(f"store round {r + 1}/{rounds} in {time.monotonic() - started:.1f} s")
    return samples


def run_storage(systems: dict[str, System], turns: int) -> dict[str, Any]:
    """The peers' storage; Rollback's is measured through its served API (bench.served,
    bench.stack), with the turn rows its turns write."""
    return {
        name: system.call("storage", turns=turns)
        for name, system in systems.items()
        if not name.startswith("rollback-")
    }


def run_served_parts(
    var: Path, skip: set[str], *, rounds: int, sizes: list[int], turns: int, args: Any
) -> dict[str, Any]:
    """The parts that run the app in processes of its own, in this order, each timed."""

    def run_turns_part() -> Any:
        from bench.turns import run_turns

        return run_turns(var / "turns", rounds=rounds, smoke=args.smoke)

    def run_mcp_part() -> Any:
        from bench.mcp import run_mcp

        return run_mcp(var / "mcp", rounds=rounds, smoke=args.smoke)

    def run_sandbox_part() -> Any:
        from bench.sandbox import run_sandbox

        return run_sandbox(var / "sandbox", rounds=rounds, smoke=args.smoke)

    def run_served_part() -> Any:
        from bench.served import run_served

        return run_served(
            var / "served",
            sizes=sizes,
            rounds=rounds,
            turns=turns,
            smoke=args.smoke,
            synchronous=args.synchronous,
        )

    def run_stack_part() -> Any:
        from bench.stack import run_stack

        return run_stack(var / "stack", rounds=rounds, smoke=args.smoke, sizes=sizes, turns=turns)

    def run_bystander_part() -> Any:
        from bench.bystander import run_bystander

        return run_bystander(var / "bystander", rounds=rounds, smoke=args.smoke)

    parts = {
        "turns": run_turns_part,
        "mcp": run_mcp_part,
        "sandbox": run_sandbox_part,
        "served": run_served_part,
        "stack": run_stack_part,
        "bystander": run_bystander_part,
    }
    found = {}
    for name, run in parts.items():
        if name in skip:
            continue
        started = time.monotonic()
        found[name] = run()
        _log(f"{name} in {time.monotonic() - started:.0f} s")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, 2 rounds: seconds")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (7)")
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated parts to leave out: "
        "store,storage,turns,mcp,sandbox,served,stack,bystander",
    )
    parser.add_argument(
        "--synchronous",
        default="NORMAL",
        choices=["NORMAL", "FULL"],
        help="SQLite's synchronous level for every system (all in WAL mode); NORMAL is "
        "Rollback's own setting",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="write latest.md and the plots again from latest.json",
    )
    args = parser.parse_args(argv)
    if args.report_only:
        from bench.report import write_report

        write_report(json.loads((args.out / "latest.json").read_text()), args.out)
        return 0
    rounds = args.rounds or (2 if args.smoke else 7)
    sizes = SMOKE_SIZES if args.smoke else FULL_SIZES
    turns = 5 if args.smoke else 200
    engines = [e for e in args.engines.split(",") if e]
    skip = set(filter(None, args.skip.split(",")))
    os.environ["BENCH_SQLITE_SYNCHRONOUS"] = args.synchronous
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    var = Path(tempfile.mkdtemp(prefix="rollback-bench-"))
    results: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "smoke": args.smoke,
        "rounds": rounds,
        "sizes": sizes,
        "storage_turns": turns,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "versions": _versions(),
        "commit": _commit(),
        "load_before": os.getloadavg(),
        "durability": f"every SQLite database in WAL mode at synchronous={args.synchronous}",
    }
    systems = _systems(var, engines)
    try:
        if "store" not in skip:
            results["store"] = run_store(systems, sizes, rounds)
        if "storage" not in skip:
            results["storage"] = run_storage(systems, turns)
    finally:
        for system in systems.values():
            system.close()
    results.update(run_served_parts(var, skip, rounds=rounds, sizes=sizes, turns=turns, args=args))
    previous = out / "latest.json"
    if skip and previous.exists() and not args.smoke:
        # A part left out keeps its figures from the previous full run, and says so.
        old = json.loads(previous.read_text())
        for part in (
            "store",
            "storage",
            "turns",
            "mcp",
            "sandbox",
            "served",
            "stack",
            "bystander",
        ):
            if part in skip and part in old:
                results[part] = old[part]
                results.setdefault("notes", []).append(
                    f"The {part} figures are carried over from the run of {old['started']}"
                    + (f" (commit {old['commit']})." if "commit" in old else ".")
                )
    results["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    results["load_after"] = os.getloadavg()
    from bench.report import write_report

    (out / "latest.json").write_text(json.dumps(results, indent=1))
    write_report(results, out)
    shutil.rmtree(var, ignore_errors=True)
    _log(f"wrote {out / 'latest.md'}")
    return 0


def _commit() -> str:
    """The commit measured, `+` when the work tree differs from it."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(  # noqa: S603 - git, our own arguments
            ["git", *args],  # noqa: S607 - git from PATH
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    return head + ("+" if git("status", "--porcelain", "--untracked-files=no") else "")


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in (
        "django",
        "agno",
        "openai",
        "langgraph",
        "langgraph-checkpoint-sqlite",
        "sqlalchemy",
        "channels",
        "channels-redis",
        "celery",
    ):
        try:
            found[name] = version(name)
        except PackageNotFoundError as exc:  # a peer that is not installed fails the run
            raise SystemExit(f"bench: {name} is not installed: pip install -e '.[bench]'") from exc
    return found


if __name__ == "__main__":
    raise SystemExit(main())
