"""The served stack, as deployed: two daphne processes and two Celery workers on PostgreSQL
(`rollback_bench_stack`, or BENCH_DATABASE_PREFIX's `_stack`) and Redis (BENCH_REDIS_URL), the
fake model server in this process.

- Turn overhead: `POST .../turns/` with `"wait": true`, and a post followed by `turn.finished`
  on `/ws/v1/`, against a raw `openai` call to the same zero-delay server.
- Streaming: the time to the first `message.delta` on `/ws/v1/` against the raw stream's first
  chunk; the bytes on the socket for replies of N tokens.
- Concurrency: 50 and 100 chats at once over WebSockets, the model streaming 50 tokens 20 ms
  apart: errors, lost or reordered tokens, the gap between tokens, a bystander's GET meanwhile,
  each process's memory.
- 1,000 idle sockets held by one daphne: its resident memory before and after, per socket.
- The whole history, a checkpoint and a restore through the API at each size; storage after N
  turns through the API (every table and index: pg_total_relation_size).
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from pathlib import Path
from typing import Any

import httpx

from bench.client import Integrator, expected, overhead, pct, reply_for
from bench.common import DASH, PG_DISK_BYTES
from bench.rollback_store import bench_database, pg_url

STACK_DATABASE = bench_database("stack")


class Stack:
    def __init__(self, var: Path, workers_concurrency: int) -> None:
        import psycopg
        import redis

        from tests.fakes.chat_server import FakeChatServer
        from tests.procs import Services, app_env

        var.mkdir(parents=True, exist_ok=True)
        with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {STACK_DATABASE} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {STACK_DATABASE}")
        self.redis_url = os.environ.get("BENCH_REDIS_URL") or "redis://127.0.0.1:6379/9"
        redis.Redis.from_url(self.redis_url).flushdb()
        self.fake = FakeChatServer().start()
        self.fake.default = reply_for
        self.env = app_env(
            var,
            self.fake.base_url,
            DATABASE_URL=pg_url(STACK_DATABASE),
            REDIS_URL=self.redis_url,
            DJANGO_SECRET_KEY="bench-stack-secret-key-" + "x" * 40,
            API_THROTTLE_USER="100000/min",
            AGNO_TELEMETRY="false",
        )
        self.services = Services(var)
        from bench.served import prepare_app

        self.key = prepare_app(self.services, self.env)
        self.webs = [self.services.start_daphne(self.env, name=f"web{i}") for i in (1, 2)]
        import sys

        for i in (1, 2):
            cmd = [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "rollback_site",
                "worker",
                "--pool=threads",
                f"--concurrency={workers_concurrency}",
                "--loglevel=WARNING",
                "-n",
                f"bench{i}@%h",
            ]
            proc = self.services.start(f"worker{i}", cmd, self.env)
            self._wait_ready(f"worker{i}", proc)
        self.api = Integrator(self.key, self.fake.base_url)

    def _wait_ready(self, name: str, proc: Any) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited: {self.services.logs[name].read_text()[-3000:]}")
            # --loglevel=WARNING hides " ready."; the worker answers a ping once it consumes.
            from celery import Celery

            app = Celery(broker=self.redis_url)
            try:
                replies = app.control.ping(timeout=1.0) or []
            finally:
                app.close()
            if any(f"bench{name[-1]}@" in next(iter(r)) for r in replies):
                return
        raise RuntimeError(f"{name} did not start")

    def close(self) -> None:
        self.services.stop_all()
        self.fake.stop()

    def _proc_files(self, name: str) -> dict[str, str]:
        """Each running process's /proc/<pid>/`name`."""
        out = {}
        for proc_name, proc in self.services.procs.items():
            try:
                out[proc_name] = Path(f"/proc/{proc.pid}/{name}").read_text()
            except OSError:
                continue
        return out

    def memory(self) -> dict[str, dict[str, float]]:
        """Resident memory (MB) of each process, now and at its peak."""
        out = {}
        for name, status in self._proc_files("status").items():
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            out[name] = {
                "rss_mb": int(fields["VmRSS"].split()[0]) / 1024,
                "peak_mb": int(fields["VmHWM"].split()[0]) / 1024,
            }
        return out

    def cpu_s(self) -> dict[str, float]:
        """CPU time (user and system, seconds) each process has used so far."""
        return {name: _cpu_of(stat) for name, stat in self._proc_files("stat").items()}

    def machine_cpu_s(self) -> dict[str, float]:
        """CPU time (seconds) the machine has used so far: `busy` over every core (/proc/stat:
        all but idle and iowait); the PostgreSQL and Redis servers' processes (`postgres`,
        `redis`: by their command name, whoever started them), and this benchmark's own process
        (`bench`: the clients and the fake model server)."""
        first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        jiffies = [int(x) for x in first]
        out = {
            "busy": (sum(jiffies) - jiffies[3] - jiffies[4]) / os.sysconf("SC_CLK_TCK"),
            "postgres": 0.0,
            "redis": 0.0,
        }
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            name = text[text.index("(") + 1 : text.rindex(")")]
            kind = "postgres" if name.startswith("postgres") else "redis" if "redis" in name else ""
            if kind:
                out[kind] += _cpu_of(text)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        out["bench"] = usage.ru_utime + usage.ru_stime
        return out

    def rss_kb(self, name: str) -> int:
        status = Path(f"/proc/{self.services.procs[name].pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0])

    def pg_storage(self) -> dict[str, int]:
        import psycopg

        with psycopg.connect(pg_url(STACK_DATABASE), autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            (disk,) = conn.execute(PG_DISK_BYTES).fetchone() or (0,)
            rows = 0
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
            for (table,) in tables:
                (n,) = conn.execute(
                    f'SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM "{table}" t'  # noqa: S608
                ).fetchone() or (0,)
                rows += int(n)
        return {"bytes": rows, "disk_bytes": int(disk)}

    def durability(self) -> dict[str, str]:
        import psycopg

        with psycopg.connect(pg_url(STACK_DATABASE), autocommit=True) as conn:
            return {
                name: str((conn.execute(f"SHOW {name}").fetchone() or ("?",))[0])
                for name in ("fsync", "synchronous_commit", "full_page_writes")
            }


def _cpu_of(stat: str) -> float:
    """The CPU time (user and system, seconds) in a process's /proc/<pid>/stat."""
    # The fields after the command's name (which may hold spaces): utime, stime at 11, 12.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _turn_samples(
    stack: Stack, client: httpx.AsyncClient, rounds: int, smoke: bool
) -> dict[str, list[dict[str, Any]]]:
    samples: dict[str, list[dict[str, Any]]] = {"raw": [], "wait": [], "ws": []}
    per_round = 2 if smoke else 5
    for _ in range(3):  # warm both processes and workers
        await stack.api.wait_turn(client, stack.webs[0])
        await stack.api.chat(client, stack.webs[1], "hi")
    for r in range(rounds):
        for i in range(per_round):
            web = stack.webs[(r + i) % 2]
            order = ["raw", "wait", "ws"]
            for op in order[r % 3 :] + order[: r % 3]:
                if op == "raw":
                    samples["raw"].append(await asyncio.to_thread(stack.api.raw))
                elif op == "wait":
                    samples["wait"].append(await stack.api.wait_turn(client, web))
                else:
                    got = await stack.api.chat(client, web, "hi")
                    samples["ws"].append({"ms": got["ms"], "first_ms": got["first_ms"]})
    return samples


async def _concurrent(
    stack: Stack, client: httpx.AsyncClient, chats: int, tokens: int
) -> dict[str, Any]:
    """`chats` chats at once (socket on one web process, post to the other), while a bystander
    GETs a session on the first web process one request after another."""
    stop = asyncio.Event()
    quiet = await stack.api.session(client, stack.webs[0])
    bystander = asyncio.create_task(stack.api.bystander(client, stack.webs[0], quiet, stop))
    cpu_before = stack.cpu_s()
    machine_before = stack.machine_cpu_s()
    started = time.perf_counter()
    results = await asyncio.gather(
        *(
            stack.api.chat(
                client,
                stack.webs[c % 2],
                f"tokens={tokens} delay=0.02",
                post_to=stack.webs[(c + 1) % 2],
            )
            for c in range(chats)
        ),
        return_exceptions=True,
    )
    wall = time.perf_counter() - started
    cpu = {k: v - cpu_before.get(k, 0.0) for k, v in stack.cpu_s().items()}
    machine = {k: v - machine_before[k] for k, v in stack.machine_cpu_s().items()}
    load = os.getloadavg()
    stop.set()
    gets = await bystander
    errors = [r for r in results if isinstance(r, BaseException)]
    done = [r for r in results if not isinstance(r, BaseException)]
    gaps = [g for r in done for g in r["gaps"]]
    pieces = max(1, sum(len(r["seqs"]) for r in done))
    web_cpu = sum(v for k, v in cpu.items() if k.startswith("web"))
    worker_cpu = sum(v for k, v in cpu.items() if k.startswith("worker"))
    return {
        "pieces": pieces,
        "cpu_web_s": web_cpu,
        "cpu_workers_s": worker_cpu,
        "cpu_per_piece_ms": (web_cpu + worker_cpu) * 1000 / pieces,
        # The machine's cores over the run: how busy (of all of them), and the CPU per chat of
        # each part (ms): the app's processes, the servers, the clients with the fake model.
        "busy": machine["busy"] / (wall * (os.cpu_count() or 1)),
        "per_chat_ms": {
            "web": web_cpu * 1000 / chats,
            "workers": worker_cpu * 1000 / chats,
            "postgres": machine["postgres"] * 1000 / chats,
            "redis": machine["redis"] * 1000 / chats,
            "bench": machine["bench"] * 1000 / chats,
        },
        "load": load,
        "errors": len(errors) + len([r for r in done if not r["ok"]]),
        "error_texts": [repr(e)[:200] for e in errors[:3]],
        "lost": len([r for r in done if r["ok"] and r["text"] != expected(tokens)]),
        "reordered": len([r for r in done if r["seqs"] != sorted(r["seqs"])]),
        "gap_p50": pct(gaps, 50),
        "gap_p99": pct(gaps, 99),
        "wall_s": wall,
        "first_p50": pct([r["first_ms"] for r in done], 50),
        "first_max": max((r["first_ms"] for r in done), default=float("nan")),
        "get_p50": pct(gets, 50),
        "get_p99": pct(gets, 99),
        "gets": len(gets),
        "memory": stack.memory(),
    }


async def _idle_sockets(stack: Stack, client: httpx.AsyncClient, n: int) -> dict[str, Any]:
    """n sockets held open on the first web process (spread over n // 10 sessions, at least
    one): its resident memory before and after, and a GET's latency while they are held."""
    from contextlib import AsyncExitStack

    sids = [await stack.api.session(client, stack.webs[0]) for _ in range(max(1, n // 10))]
    await asyncio.sleep(1.0)
    before = stack.rss_kb("web1")
    async with AsyncExitStack() as held:
        sockets = await stack.api.hold_sockets(held, stack.webs[0], sids, n)
        await asyncio.sleep(2.0)  # let the process settle
        after = stack.rss_kb("web1")
        gets = []
        for _ in range(20):
            t = time.perf_counter()
            r = await client.get(
                f"{stack.webs[0]}/api/v1/sessions/{sids[0]}/", headers=stack.api.headers
            )
            r.raise_for_status()
            gets.append((time.perf_counter() - t) * 1000)
        open_now = sum(1 for socket in sockets if socket.close_code is None)
    return {
        "sockets": n,
        "open": open_now,
        "rss_before_mb": before / 1024,
        "rss_after_mb": after / 1024,
        "kb_per_socket": (after - before) / n,
        "get_p50": pct(gets, 50),
    }


async def _measure(
    stack: Stack, rounds: int, smoke: bool, sizes: list[int], turns: int
) -> dict[str, Any]:
    from bench.served import storage_via_api, store_via_api

    async with httpx.AsyncClient(timeout=300) as client:
        samples = await _turn_samples(stack, client, rounds, smoke)
        socket_bytes = {}
        for n in [10, 100] if smoke else [10, 100, 1000]:
            got = await stack.api.chat(client, stack.webs[0], f"tokens={n} delay=0")
            if got["text"] != expected(n):
                raise RuntimeError(f"a reply of {n} tokens lost or reordered tokens")
            socket_bytes[n] = got["bytes"]
        concurrency = {}
        for chats in [3, 6] if smoke else [50, 100]:
            concurrency[chats] = await _concurrent(stack, client, chats, 10 if smoke else 50)
        idle = await _idle_sockets(stack, client, 10 if smoke else 1000)
        store = await store_via_api(stack.api, client, stack.webs[0], sizes, rounds)
        before = stack.pg_storage()
        await storage_via_api(stack.api, client, stack.webs[0], turns)
        after = stack.pg_storage()
    return {
        "samples": samples,
        "socket_bytes": socket_bytes,
        "concurrency": concurrency,
        "idle": idle,
        "store": store,
        "storage": {k: after[k] - before[k] for k in before},
        "durability": stack.durability(),
    }


def run_stack(
    var: Path, *, rounds: int, smoke: bool, sizes: list[int], turns: int
) -> dict[str, Any]:
    stack = Stack(var, workers_concurrency=8 if smoke else 50)
    try:
        data = asyncio.run(_measure(stack, rounds, smoke, sizes, turns))
    finally:
        stack.close()
    s = data["samples"]
    added, table = overhead(s)
    data["overhead"] = added
    d = data["durability"]
    lines = [
        "## The served stack: two daphne processes, two Celery workers, PostgreSQL and Redis",
        "",
        f"{len(s['raw'])} samples each, interleaved, alternating the two web processes; "
        f"median (min{DASH}max). PostgreSQL at fsync={d['fsync']}, "
        f"synchronous_commit={d['synchronous_commit']}, "
        f"full_page_writes={d['full_page_writes']}.",
        "",
        *table,
        "",
        "Bytes on `/ws/v1/` for a reply of N tokens (every frame of the turn):",
        "",
        "| tokens | bytes | bytes per token |",
        "| --- | --- | --- |",
    ]
    for n, b in data["socket_bytes"].items():
        lines.append(f"| {n} | {b:,} | {b / n:.0f} |")
    lines += [
        "",
        "Concurrent chats (each its own session and socket; the socket on one web process, "
        "the post to the other; the model streams its tokens 20 ms apart; meanwhile a bystander "
        "GETs a session on the first web process, one request after another, 20 ms apart):",
        "",
        "| chats | errors | lost | reordered | gap p50 | gap p99 | first token p50 (max) | "
        "bystander GET p50 / p99 | wall | pieces | CPU per piece (web, workers) | "
        "cores busy | CPU per chat (web, workers, PostgreSQL, Redis, clients) | "
        "load average after | memory (peak RSS) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- |",
    ]
    for chats, c in data["concurrency"].items():
        memory = ", ".join(f"{k} {v['peak_mb']:.0f} MB" for k, v in c["memory"].items())
        lines.append(
            f"| {chats} | {c['errors']} | {c['lost']} | {c['reordered']} | "
            f"{c['gap_p50']:.1f} ms | {c['gap_p99']:.1f} ms | {c['first_p50']:.0f} ms "
            f"({c['first_max']:.0f} ms) | {c['get_p50']:.1f} / {c['get_p99']:.1f} ms "
            f"(n={c['gets']}) | {c['wall_s']:.1f} s | {c['pieces']:,} | "
            f"{c['cpu_per_piece_ms']:.2f} ms ({c['cpu_web_s'] * 1000 / c['pieces']:.2f}, "
            f"{c['cpu_workers_s'] * 1000 / c['pieces']:.2f}) | {c['busy']:.0%} | "
            + ", ".join(f"{v:.0f}" for v in c["per_chat_ms"].values())
            + f" ms | {c['load'][0]:.1f} / {c['load'][1]:.1f} / {c['load'][2]:.1f} | {memory} |"
        )
        if c["error_texts"]:
            lines.append(f"\nFirst errors at {chats}: " + "; ".join(c["error_texts"]))
    idle = data["idle"]
    lines += [
        "",
        f"Idle sockets: {idle['sockets']:,} held by one daphne ({idle['open']:,} still open "
        f"after 2 s): RSS {idle['rss_before_mb']:.1f} MB before, {idle['rss_after_mb']:.1f} MB "
        f"with them, **{idle['kb_per_socket']:.1f} kB per socket**; a GET meanwhile "
        f"{idle['get_p50']:.1f} ms (p50).",
    ]
    top = max(data["concurrency"])
    c = data["concurrency"][top]
    targets = [
        (
            "added to a zero-latency model call ≤ 25 ms with Celery and Redis (`wait: true`)",
            f"{added['wait']:.1f} ms",
            added["wait"] <= 25,
            "",
        ),
        (
            "added to a zero-latency model call ≤ 25 ms with Celery and Redis (`/ws/v1/`)",
            f"{added['ws']:.1f} ms",
            added["ws"] <= 25,
            "",
        ),
        (
            "added to the first token ≤ 15 ms on `/ws/v1/` (Celery and Redis)",
            f"{added['first']:.1f} ms",
            added["first"] <= 15,
            "",
        ),
        (
            f"{top} concurrent streams: zero errors, nothing lost or reordered",
            f"{c['errors']} errors, {c['lost']} lost, {c['reordered']} reordered",
            c["errors"] == 0 and c["lost"] == 0 and c["reordered"] == 0,
            "",
        ),
        (
            f"{top} concurrent streams: first token p50 ≤ 1.5 s",
            f"{c['first_p50']:.0f} ms (max {c['first_max']:.0f} ms)",
            c["first_p50"] <= 1500,
            "",
        ),
        (
            f"{top} concurrent streams: p99 gap between tokens ≤ 250 ms",
            f"{c['gap_p99']:.1f} ms (first token p50 {c['first_p50']:.0f} ms)",
            c["gap_p99"] <= 250,
            "",
        ),
        (
            f"{top} concurrent streams: a bystander's GET p99 ≤ 150 ms",
            f"{c['get_p99']:.1f} ms",
            c["get_p99"] <= 150,
            "",
        ),
        (
            f"{top} concurrent streams: CPU per streamed piece ≤ 1 ms (all the CPU both daphne "
            "processes and both workers used during the run, each chat's post, socket and turn "
            "and the bystander's GETs included, over the pieces streamed)",
            f"{c['cpu_per_piece_ms']:.2f} ms ({c['pieces']:,} pieces)",
            c["cpu_per_piece_ms"] <= 1,
            "",
        ),
        (
            f"{idle['sockets']:,} idle sockets held by one daphne, memory per socket stated",
            f"{idle['open']:,} open, {idle['kb_per_socket']:.1f} kB per socket",
            idle["open"] == idle["sockets"],
            "",
        ),
    ]
    data["socket_bytes"] = {str(k): v for k, v in data["socket_bytes"].items()}
    data["concurrency"] = {str(k): v for k, v in data["concurrency"].items()}
    return {"data": data, "markdown": "\n".join(lines), "targets": targets}
