"""The served stack, as deployed: two daphne processes and two Celery workers on PostgreSQL
(rollback_bench_stack) and Redis (BENCH_REDIS_URL), the fake model server in this process.

- Turn overhead: `POST .../turns/` with `"wait": true`, and a post followed by `turn.finished`
  on `/ws/v1/`, against a raw `openai` call to the same zero-delay server.
- Streaming: the time to the first `message.delta` on `/ws/v1/` against the raw stream's first
  chunk; the bytes on the socket for replies of N tokens.
- Concurrency: 50 and 100 chats at once over WebSockets, the model streaming 50 tokens 20 ms
  apart: errors, lost or reordered tokens, the gap between tokens, each process's memory.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from bench.rollback_store import pg_url

STACK_DATABASE = "rollback_bench_stack"


def _reply_for(body: dict) -> Any:
    from tests.fakes.chat_server import Reply, last_user_text

    found = re.search(r"tokens=(\d+) delay=([\d.]+)", last_user_text(body) or "")
    if not found:
        return Reply("ok")
    n, delay = int(found.group(1)), float(found.group(2))
    return Reply("".join(f"t{i} " for i in range(1, n + 1)), delay=delay)


def _expected(n: int) -> str:
    return "".join(f"t{i} " for i in range(1, n + 1))


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
        self.fake.default = _reply_for
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
        self.services.prepare(self.env)
        self.services.manage(
            self.env,
            "shell",
            "-c",
            "from accounts.models import User; User.objects.create_user('bench')",
        )
        self.key = self.services.manage(self.env, "createapikey", "bench").strip().splitlines()[-1]
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
        self.headers = {"Authorization": f"Bearer {self.key}"}
        from openai import OpenAI

        self.raw_client = OpenAI(base_url=self.fake.base_url, api_key="bench", max_retries=0)

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

    def memory(self) -> dict[str, float]:
        """Resident memory (MB) of each process, now and at its peak."""
        out = {}
        for name, proc in self.services.procs.items():
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            out[name] = {
                "rss_mb": int(fields["VmRSS"].split()[0]) / 1024,
                "peak_mb": int(fields["VmHWM"].split()[0]) / 1024,
            }
        return out

    # --- one chat -------------------------------------------------------------------------

    async def session(self, client: httpx.AsyncClient, web: str) -> int:
        r = await client.post(
            f"{web}/api/v1/sessions/", json={"name": "bench"}, headers=self.headers
        )
        r.raise_for_status()
        return int(r.json()["id"])

    def raw(self) -> dict[str, float]:
        start = time.perf_counter()
        first = None
        for chunk in self.raw_client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter()
        end = time.perf_counter()
        return {"ms": (end - start) * 1000, "first_ms": ((first or end) - start) * 1000}

    async def wait_turn(self, client: httpx.AsyncClient, web: str) -> dict[str, float]:
        sid = await self.session(client, web)
        start = time.perf_counter()
        r = await client.post(
            f"{web}/api/v1/sessions/{sid}/turns/",
            json={"message": "hi", "wait": True},
            headers=self.headers,
        )
        ms = (time.perf_counter() - start) * 1000
        if r.status_code != 201:
            raise RuntimeError(f"wait: {r.status_code} {r.text[:300]}")
        return {"ms": ms}

    async def chat(
        self, client: httpx.AsyncClient, web: str, message: str, post_to: str | None = None
    ) -> dict[str, Any]:
        """Open the session's socket, post a turn, collect its events until it ends."""
        from websockets.asyncio.client import connect

        sid = await self.session(client, web)
        url = web.replace("http://", "ws://") + f"/ws/v1/sessions/{sid}/"
        deltas: list[tuple[float, dict]] = []
        frame_bytes = 0
        async with connect(
            url, additional_headers=self.headers, open_timeout=30, max_size=None
        ) as socket:
            start = time.perf_counter()
            r = await client.post(
                f"{post_to or web}/api/v1/sessions/{sid}/turns/",
                json={"message": message},
                headers=self.headers,
            )
            if r.status_code != 202:
                raise RuntimeError(f"post: {r.status_code} {r.text[:300]}")
            turn = r.json()["id"]
            end_type = None
            while end_type is None:
                raw = await asyncio.wait_for(socket.recv(), timeout=120)
                now = time.perf_counter()
                frame_bytes += len(raw.encode() if isinstance(raw, str) else raw)
                event = json.loads(raw)
                if event.get("turn") != turn:
                    continue
                if event["type"] == "message.delta":
                    deltas.append((now, event))
                elif event["type"] in ("turn.finished", "turn.failed", "turn.cancelled"):
                    end_type = event["type"]
                    end = now
        return {
            "ms": (end - start) * 1000,
            "first_ms": ((deltas[0][0] if deltas else end) - start) * 1000,
            "ok": end_type == "turn.finished",
            "text": "".join(e["delta"] for _, e in deltas),
            "seqs": [e.get("seq") for _, e in deltas],
            "gaps": [(b[0] - a[0]) * 1000 for a, b in itertools.pairwise(deltas)],
            "bytes": frame_bytes,
        }


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _spread(values: list[float]) -> str:
    return f"**{statistics.median(values):.1f} ms** ({min(values):.1f}–{max(values):.1f})"


async def _measure(stack: Stack, rounds: int, smoke: bool) -> dict[str, Any]:
    samples: dict[str, list[dict[str, Any]]] = {"raw": [], "wait": [], "ws": []}
    per_round = 2 if smoke else 5
    async with httpx.AsyncClient(timeout=180) as client:
        for _ in range(3):  # warm both processes and workers
            await stack.wait_turn(client, stack.webs[0])
            await stack.chat(client, stack.webs[1], "hi")
        for r in range(rounds):
            for i in range(per_round):
                web = stack.webs[(r + i) % 2]
                order = ["raw", "wait", "ws"]
                for op in order[r % 3 :] + order[: r % 3]:
                    if op == "raw":
                        samples["raw"].append(await asyncio.to_thread(stack.raw))
                    elif op == "wait":
                        samples["wait"].append(await stack.wait_turn(client, web))
                    else:
                        samples["ws"].append(await stack.chat(client, web, "hi"))
        sizes = [10, 100] if smoke else [10, 100, 1000]
        socket_bytes = {}
        for n in sizes:
            got = await stack.chat(client, stack.webs[0], f"tokens={n} delay=0")
            assert got["text"] == _expected(n), "a reply lost or reordered tokens"
            socket_bytes[n] = got["bytes"]
        concurrency = {}
        for chats in [4, 8] if smoke else [50, 100]:
            n = 10 if smoke else 50
            started = time.perf_counter()
            results = await asyncio.gather(
                *(
                    stack.chat(
                        client,
                        stack.webs[c % 2],
                        f"tokens={n} delay=0.02",
                        post_to=stack.webs[(c + 1) % 2],
                    )
                    for c in range(chats)
                ),
                return_exceptions=True,
            )
            wall = time.perf_counter() - started
            errors = [r for r in results if isinstance(r, BaseException)]
            done = [r for r in results if isinstance(r, dict)]
            failed = [r for r in done if not r["ok"]]
            lost = [r for r in done if r["ok"] and r["text"] != _expected(n)]
            reordered = [r for r in done if r["seqs"] != sorted(r["seqs"])]
            gaps = [g for r in done for g in r["gaps"]]
            concurrency[chats] = {
                "errors": len(errors) + len(failed),
                "error_texts": [repr(e)[:200] for e in errors[:3]],
                "lost": len(lost),
                "reordered": len(reordered),
                "gap_p50": _pct(gaps, 50),
                "gap_p99": _pct(gaps, 99),
                "wall_s": wall,
                "first_p50": _pct([r["first_ms"] for r in done], 50),
                "memory": stack.memory(),
            }
    return {"samples": samples, "socket_bytes": socket_bytes, "concurrency": concurrency}


def run_stack(var: Path, *, rounds: int, smoke: bool) -> dict[str, Any]:
    stack = Stack(var, workers_concurrency=8 if smoke else 50)
    try:
        data = asyncio.run(_measure(stack, rounds, smoke))
    finally:
        stack.close()
    s = data["samples"]
    raw = statistics.median(x["ms"] for x in s["raw"])
    raw_first = statistics.median(x["first_ms"] for x in s["raw"])
    wait = statistics.median(x["ms"] for x in s["wait"])
    ws = statistics.median(x["ms"] for x in s["ws"])
    ws_first = statistics.median(x["first_ms"] for x in s["ws"])
    lines = [
        "## The served stack: two daphne processes, two Celery workers, PostgreSQL and Redis",
        "",
        f"{len(s['raw'])} samples each, interleaved, alternating the two web processes; "
        "median (min–max).",
        "",
        "| path | whole turn | first token | added to the raw call |",
        "| --- | --- | --- | --- |",
        f"| raw `openai` call (stream) | {_spread([x['ms'] for x in s['raw']])} | "
        f"{_spread([x['first_ms'] for x in s['raw']])} | — |",
        f'| API, `"wait": true` | {_spread([x["ms"] for x in s["wait"]])} | — | '
        f"**{wait - raw:.1f} ms** |",
        f"| API (202), events on `/ws/v1/` | {_spread([x['ms'] for x in s['ws']])} | "
        f"{_spread([x['first_ms'] for x in s['ws']])} | **{ws - raw:.1f} ms** "
        f"(first token: **{ws_first - raw_first:.1f} ms**) |",
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
        "the post to the other; the model streams its tokens 20 ms apart):",
        "",
        "| chats | errors | lost | reordered | gap p50 | gap p99 | first token p50 | wall | "
        "memory (peak RSS) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for chats, c in data["concurrency"].items():
        memory = ", ".join(f"{k} {v['peak_mb']:.0f} MB" for k, v in c["memory"].items())
        lines.append(
            f"| {chats} | {c['errors']} | {c['lost']} | {c['reordered']} | "
            f"{c['gap_p50']:.1f} ms | {c['gap_p99']:.1f} ms | {c['first_p50']:.0f} ms | "
            f"{c['wall_s']:.1f} s | {memory} |"
        )
        if c["error_texts"]:
            lines.append(f"\nFirst errors at {chats}: " + "; ".join(c["error_texts"]))
    top = max(data["concurrency"])
    c = data["concurrency"][top]
    targets = [
        (
            "added turn overhead < 25 ms with Celery and Redis (`wait: true`)",
            f"{wait - raw:.1f} ms",
            wait - raw < 25,
            "",
        ),
        (
            "added turn overhead < 25 ms with Celery and Redis (`/ws/v1/`)",
            f"{ws - raw:.1f} ms",
            ws - raw < 25,
            "",
        ),
        (
            "added time to first token < 10 ms on `/ws/v1/` (Celery and Redis)",
            f"{ws_first - raw_first:.1f} ms",
            ws_first - raw_first < 10,
            "",
        ),
        (
            f"{top} concurrent streams: zero errors, nothing lost or reordered, p99 gap < 100 ms",
            f"{c['errors']} errors, {c['lost']} lost, {c['reordered']} reordered, "
            f"p99 {c['gap_p99']:.1f} ms",
            c["errors"] == 0 and c["lost"] == 0 and c["reordered"] == 0 and c["gap_p99"] < 100,
            "",
        ),
    ]
    data["socket_bytes"] = {str(k): v for k, v in data["socket_bytes"].items()}
    data["concurrency"] = {str(k): v for k, v in data["concurrency"].items()}
    for v in data["samples"]["ws"]:
        v.pop("text", None)
    return {"data": data, "markdown": "\n".join(lines), "targets": targets}
