"""Rollback served as a newcomer runs it (`python -m rollback_site.serve`: one daphne, SQLite,
the in-memory channel layer, turns on the web process's pool), started by the benchmark and
driven from outside like an integrator: HTTP requests with an API key and `/ws/v1/` sockets,
beside a raw `openai` client on the same zero-delay fake model server.

- Turn overhead: `POST .../turns/` with `"wait": true`, and a post followed by `turn.finished`
  on `/ws/v1/`; the first `message.delta` against the raw stream's first chunk.
- Statements per turn and per socket event, counted inside the served process by bench.hooks.
- The whole history (`GET .../messages/` in pages of 1,000) at each size, imported through
  `POST /sessions/import/`; a checkpoint and a restore through the API at each size.
- Storage after N turns through the API, a checkpoint after each: every page of every table and
  index (dbstat), and the rows' bytes.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import httpx

from bench.client import Integrator, overhead, reply_for
from bench.common import DASH, sqlite_storage, text
from bench.floor import floor_report, measure_floor
from bench.hooks import read_counter


def prepare_app(services: Any, env: dict[str, str]) -> str:
    """Migrate, make the user `bench` and an API key of theirs: the key. Two manage.py runs
    (static files are collected by the serving process itself)."""
    services.manage(env, "migrate", "--noinput")
    out = services.manage(
        env,
        "shell",
        "-c",
        "from accounts.models import User; from django.core.management import call_command; "
        "User.objects.create_user('bench'); call_command('createapikey', 'bench')",
    )
    return str(out.strip().splitlines()[-1])


class Served:
    def __init__(self, var: Path, synchronous: str) -> None:
        from tests.fakes.chat_server import FakeChatServer
        from tests.procs import Services, app_env, free_port, wait_until_answers

        var.mkdir(parents=True, exist_ok=True)
        self.var = var
        self.counter = var / "queries.bin"
        self.fake = FakeChatServer().start()
        self.fake.default = reply_for
        self.env = app_env(
            var,
            self.fake.base_url,
            DJANGO_SECRET_KEY="bench-served-secret-key-" + "x" * 40,
            API_THROTTLE_USER="1000000/min",
            AGNO_TELEMETRY="false",
            BENCH_SQLITE_SYNCHRONOUS=synchronous,
            BENCH_QUERY_COUNTER=str(self.counter),
        )
        self.services = Services(var)
        try:
            key = prepare_app(self.services, self.env)
            port = free_port()
            cmd = [sys.executable, "-m", "bench.hooks", "-b", "127.0.0.1", "-p", str(port)]
            proc = self.services.start("served", cmd, self.env)
            self.web = f"http://127.0.0.1:{port}"
            wait_until_answers(f"{self.web}/accounts/login/", proc, timeout=90)
        except BaseException:
            self.close()
            raise
        self.api = Integrator(key, self.fake.base_url)

    def close(self) -> None:
        self.services.stop_all()
        self.fake.stop()

    def queries(self) -> int:
        return read_counter(self.counter)

    def storage(self) -> dict[str, int]:
        return sqlite_storage(str(self.var / "rollback.sqlite3"))


async def _turns(s: Served, client: httpx.AsyncClient, rounds: int, smoke: bool) -> dict[str, Any]:
    samples: dict[str, list[Any]] = {"raw": [], "wait": [], "ws": []}
    per_round = 3 if smoke else 10
    for _ in range(3):  # warm the process (imports, agno's first run, connections)
        await s.api.wait_turn(client, s.web)
        await s.api.chat(client, s.web, "hi")
    for r in range(rounds):
        order = ["raw", "wait", "ws"]
        order = order[r % 3 :] + order[: r % 3]
        for _ in range(per_round):
            for op in order:
                if op == "raw":
                    samples["raw"].append(await asyncio.to_thread(s.api.raw))
                elif op == "wait":
                    samples["wait"].append(await s.api.wait_turn(client, s.web))
                else:
                    got = await s.api.chat(client, s.web, "hi")
                    samples["ws"].append({"ms": got["ms"], "first_ms": got["first_ms"]})
    return samples


class Queries(TypedDict):
    turn: float
    turn_all: list[int]
    chat_one_socket: float
    chat_more_sockets: float
    extra_sockets: int
    events: int
    per_socket_event: float
    idle_after_chats: NotRequired[float]


async def _queries(s: Served, client: httpx.AsyncClient) -> Queries:
    """Statements of one `wait: true` turn; and per socket event: the same chat heard by one
    socket, then by that socket and `extra` more on its session, the difference divided by the
    extra sockets and the events each received. Each count is less the process's background
    statements (measured over the second before it, at the same rate)."""
    from contextlib import AsyncExitStack

    async def background() -> float:
        """Statements a second while nothing is asked (sockets closed long ago still cost)."""
        before = s.queries()
        await asyncio.sleep(1.0)
        return float(s.queries() - before)

    async def counted(action: Any) -> tuple[float, Any]:
        """The statements of `action` and what it did after (0.5 s), less the background."""
        rate = await background()
        started, before = time.monotonic(), s.queries()
        got = await action()
        await asyncio.sleep(0.5)
        return s.queries() - before - rate * (time.monotonic() - started), got

    for _ in range(2):  # the first turns of a process do more (caches, connections)
        await s.api.wait_turn(client, s.web)
        await s.api.chat(client, s.web, "hi")
    per_turn = []
    for _ in range(3):
        sid = await s.api.session(client, s.web)
        n, _ = await counted(lambda sid=sid: s.api.wait_turn(client, s.web, sid=sid))
        per_turn.append(round(n))
    alone = []
    for _ in range(3):
        sid = await s.api.session(client, s.web)
        n, got = await counted(lambda sid=sid: s.api.chat(client, s.web, "hi", sid=sid))
        alone.append(n)
    extra = 4
    heard = []
    for _ in range(3):
        sid = await s.api.session(client, s.web)
        async with AsyncExitStack() as stack:
            await s.api.hold_sockets(stack, s.web, [sid], extra)
            await asyncio.sleep(0.3)
            n, got = await counted(lambda sid=sid: s.api.chat(client, s.web, "hi", sid=sid))
            heard.append(n)
    events = max(1, got["events"])
    per_event = (statistics.median(heard) - statistics.median(alone)) / (extra * events)
    return {
        "turn": statistics.median(per_turn),
        "turn_all": per_turn,
        "chat_one_socket": statistics.median(alone),
        "chat_more_sockets": statistics.median(heard),
        "extra_sockets": extra,
        "events": events,
        "per_socket_event": per_event,
    }


async def _idle_rate(s: Served, seconds: float = 2.0) -> float:
    """Statements a second while nothing is asked of the process."""
    before = s.queries()
    await asyncio.sleep(seconds)
    return (s.queries() - before) / seconds


async def store_via_api(
    api: Integrator, client: httpx.AsyncClient, web: str, sizes: list[int], rounds: int
) -> dict[str, Any]:
    """The whole history, a checkpoint and a restore (as a branch) through the API at each
    size, interleaved; the sessions imported through `POST /sessions/import/`."""
    sessions = {n: await api.import_session(client, web, n) for n in sizes}
    bases = {n: (await api.checkpoint(client, web, sid))["id"] for n, sid in sessions.items()}
    out: dict[str, dict[str, list[dict[str, float]]]] = {
        "read": {},
        "checkpoint": {},
        "restore": {},
        "get": {},
    }
    for r in range(rounds):
        for n in sizes[r % len(sizes) :] + sizes[: r % len(sizes)]:
            out["read"].setdefault(str(n), []).append(
                await api.read_history(client, web, sessions[n], n)
            )
            got = await api.checkpoint(client, web, sessions[n])
            out["checkpoint"].setdefault(str(n), []).append({"ms": got["ms"]})
            out["restore"].setdefault(str(n), []).append(await api.restore(client, web, bases[n]))
            out["get"].setdefault(str(n), []).append(
                await api.get_session(client, web, sessions[n])
            )
    return out


async def storage_via_api(api: Integrator, client: httpx.AsyncClient, web: str, turns: int) -> None:
    """`turns` turns through the API, a checkpoint after each: the same exchanges as the
    peers store (message 2t and its reply, message 2t + 1, from bench.common.text)."""
    sid = await api.session(client, web)
    for t in range(turns):
        await api.wait_turn(client, web, sid=sid, message=text(2 * t))
        await api.checkpoint(client, web, sid)


async def _measure(
    s: Served, sizes: list[int], rounds: int, turns: int, smoke: bool
) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=300) as client:
        queries = await _queries(s, client)
        samples = await _turns(s, client, rounds, smoke)
        queries["idle_after_chats"] = await _idle_rate(s)
        store = await store_via_api(s.api, client, s.web, sizes, rounds)
        floor = await asyncio.to_thread(
            measure_floor,
            env=s.env,
            web=s.web,
            key=s.api.key,
            session=await s.api.session(client, s.web),
            var=s.var,
            rounds=rounds,
            per_round=5 if smoke else 30,
        )
        before = s.storage()
        await storage_via_api(s.api, client, s.web, turns)
        after = s.storage()
    return {
        "samples": samples,
        "queries": queries,
        "store": store,
        "floor": floor,
        "storage": {k: after[k] - before[k] for k in before},
    }


def run_served(
    var: Path, *, sizes: list[int], rounds: int, turns: int, smoke: bool, synchronous: str
) -> dict[str, Any]:
    served = Served(var, synchronous)
    try:
        data = asyncio.run(_measure(served, sizes, rounds, turns, smoke))
    finally:
        served.close()
    s = data["samples"]
    q = data["queries"]
    added, table = overhead(s)
    data["overhead"] = added
    lines = [
        "## Served in process: one daphne as `make run` starts it (SQLite, in-memory layer)",
        "",
        f"Driven from outside over HTTP with an API key and on `/ws/v1/` ({len(s['raw'])} "
        "samples each, interleaved with the raw `openai` call to the same zero-delay fake "
        f"server; median (min{DASH}max)).",
        "",
        *table,
        "",
        f"Statements (through Django's cursors, counted in the served process; BEGIN/COMMIT "
        "not counted; each count less the process's background statements, measured over the "
        "second before it): a turn "
        f"**{q['turn']:.0f}** (`wait: true`, median of {q['turn_all']}); a chat heard by its "
        f"one socket {q['chat_one_socket']:.0f}, by {q['extra_sockets']} more sockets of its "
        f"session {q['chat_more_sockets']:.0f}: **{q['per_socket_event']:.1f}** per socket per "
        f"event ({q['events']} events each). After the timed chats, with every socket closed, "
        f"the process still ran **{q['idle_after_chats']:.0f} statements a second**.",
    ]
    targets = [
        (
            "added to a zero-latency model call ≤ 10 ms in process, served (`wait: true`)",
            f"{added['wait']:.1f} ms",
            added["wait"] <= 10,
            "",
        ),
        (
            "added to a zero-latency model call ≤ 10 ms in process, served (`/ws/v1/`)",
            f"{added['ws']:.1f} ms",
            added["ws"] <= 10,
            "",
        ),
        (
            "added to the first token ≤ 5 ms on `/ws/v1/`, served in process",
            f"{added['first']:.1f} ms",
            added["first"] <= 5,
            "",
        ),
        (
            "statements per turn ≤ 15 (BEGIN and COMMIT not counted)",
            f"{q['turn']:.0f} (`wait: true`, served in process)",
            q["turn"] <= 15,
            "",
        ),
        (
            "statements per socket per event, stated (at most 2)",
            f"{q['per_socket_event']:.1f}",
            q["per_socket_event"] <= 2,
            "",
        ),
    ]
    floor_lines, floor_targets = floor_report(data["floor"])
    lines += ["", *floor_lines]
    targets += floor_targets
    return {"data": data, "markdown": "\n".join(lines), "targets": targets}
