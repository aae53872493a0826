"""A bystander's turn on the scaled-out stack, as the README deploys it (issue 36): one daphne, one
Celery worker with the README's command (`celery -A rollback_site worker`: the prefork pool) at
concurrency 2, and beat, on PostgreSQL and Redis. Four such stacks run side by side, alike but for
what else they hold: nothing; WAITING turns paused for an approval; HUNG turns whose custom tool
hung and that were stopped while it ran (their calls abandoned in the worker's pool processes,
agents.tool_deadline); both at once. Another user's plain "hello" is sent to each in turn, the
stacks in a rotating order, through `POST .../turns/` with `"wait": true` and as the page's path
does (a post, then `turn.finished` on the session's socket). Before issue 36, two waiting approvals
or two hung tools held both of the worker's processes, and every other turn queued.

Each stack has a database of its own (BENCH_DATABASE_PREFIX's `_bystander_none`, `_waiting`,
`_hung`, `_both`, copies of one migrated template) and a Redis database of its own:
BENCH_REDIS_URL's, and the three numbered below it (9, 8, 7 and 6 by default), which the run
flushes. The fake model server runs in this process and serves the four; its answer depends on the
message (`answer`). The tools are the embedded bench's (bench.turns): `bench.turns.hang` and
`tests.agents.approval_tools.send_email`, offered to every turn of every stack (AGENT_TOOLS)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.client import END_TYPES, NOISE, Integrator, slower_target, spread90
from bench.common import DASH, check
from bench.rollback_store import bench_database, pg_url

STACKS = ("none", "waiting", "hung", "both")
TOOLS = "bench.turns.hang,tests.agents.approval_tools.send_email"
PATHS = ("wait", "ws")
MAIL = "mail bob the report"
JOB = "run the job"
ABANDONED = re.compile(r"abandoned \(turn \d+ stopped\)")


def answer(body: dict[str, Any]) -> Any:
    """The fake model: a call of send_email (which waits for approval) for MAIL, of hang for
    JOB, "ok" for anything else and after any tool result (a refused or timed-out call)."""
    from tests.fakes.chat_server import Reply, ToolCall, ToolCalls, last_user_text

    messages = body.get("messages") or []
    if messages and messages[-1].get("role") == "tool":
        return Reply("ok")
    asked = last_user_text(body)
    if asked == MAIL:
        return ToolCalls([ToolCall("send_email", {"to": "bob@example.com", "subject": "report"})])
    if asked.startswith(JOB):
        return ToolCalls([ToolCall("hang", {"job": asked.removeprefix(JOB).strip() or "0"})])
    return Reply("ok")


def redis_urls(base: str, n: int) -> list[str]:
    """`base`'s Redis database and the n - 1 numbered below it."""
    server, _, db = base.rpartition("/")
    first = int(db or 0)
    check(first >= n - 1, f"BENCH_REDIS_URL's database must be {n - 1} or more: {base}")
    return [f"{server}/{first - i}" for i in range(n)]


SETUP = """
from accounts.models import User
from accounts.services import apikey_create
for name in ("loader", "bystander"):
    print(apikey_create(user=User.objects.create_user(name), name="bench")[1])
"""


class Stacks:
    """The four stacks, one fake model server, two users' keys (the same in every stack: the
    databases are copies)."""

    def __init__(self, var: Path) -> None:
        from tests.fakes.chat_server import FakeChatServer

        var.mkdir(parents=True, exist_ok=True)
        self.var = var
        self.fake = FakeChatServer().start()
        self.fake.default = answer
        self.databases = {name: bench_database(f"bystander_{name}") for name in STACKS}
        self.template = bench_database("bystander_template")
        base = os.environ.get("BENCH_REDIS_URL") or "redis://127.0.0.1:6379/9"
        self.redis = dict(zip(STACKS, redis_urls(base, len(STACKS)), strict=True))
        self.services: dict[str, Any] = {}
        self.webs: dict[str, str] = {}
        try:
            self.loader, self.bystander = self._prepare()
            self._start()
        except BaseException:
            self.close()
            raise

    def env(self, name: str, database: str) -> dict[str, str]:
        from tests.procs import app_env

        return app_env(
            self.var / name,
            self.fake.base_url,
            DATABASE_URL=pg_url(database),
            DJANGO_SECRET_KEY="bench-bystander-secret-key-" + "x" * 40,
            API_THROTTLE_USER="100000/min",
            AGNO_TELEMETRY="false",
            AGENT_TOOLS=TOOLS,
            # Past the run: a waiting turn must still wait at its end (checked).
            AGENT_APPROVAL_SECONDS="7200",
        )

    def _prepare(self) -> tuple[Integrator, Integrator]:
        """Migrate a template once, make the two users and their keys in it, copy it for each
        stack."""
        import psycopg

        from tests.procs import manage_ok

        env = self.env("template", self.template)
        with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
            for name in [self.template, *self.databases.values()]:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.template}"')
            manage_ok(env, "migrate", "--noinput")
            loader, bystander = manage_ok(env, "shell", "-c", SETUP).split()[-2:]
            for name in self.databases.values():
                _copy(conn, self.template, name)
            conn.execute(f'DROP DATABASE "{self.template}"')
        return (
            Integrator(loader, self.fake.base_url),
            Integrator(bystander, self.fake.base_url),
        )

    def _start(self) -> None:
        """Every process of every stack started at once, then waited for."""
        import redis

        from tests.procs import Services, free_port, wait_until_answers

        procs = []
        for name, database in self.databases.items():
            redis.Redis.from_url(self.redis[name]).flushdb()
            env = self.env(name, database) | {"REDIS_URL": self.redis[name]}
            (self.var / name).mkdir(exist_ok=True)
            services = self.services[name] = Services(self.var / name)
            port = free_port()
            web = services.start(
                "web",
                [sys.executable, "-m", "rollback_site.serve", "-b", "127.0.0.1", "-p", str(port)],
                env,
            )
            self.webs[name] = f"http://127.0.0.1:{port}"
            celery = [sys.executable, "-m", "celery", "-A", "rollback_site"]
            worker = services.start(
                "worker", [*celery, "worker", "--concurrency=2", "-n", f"{name}@%h"], env
            )
            schedule = str(self.var / name / "beat-schedule")
            beat = services.start("beat", [*celery, "beat", "-s", schedule], env)
            procs.append((services, web, worker, beat, self.webs[name]))
        for services, web, worker, beat, url in procs:
            wait_until_answers(f"{url}/accounts/login/", web, timeout=120)
            _wait_for_log(services, "worker", " ready.", worker)
            _wait_for_log(services, "beat", "beat: Starting", beat)

    def abandoned(self, name: str) -> int:
        """The calls the stack's worker logged as abandoned at a Stop."""
        return len(ABANDONED.findall(self.services[name].output("worker")))

    def close(self) -> None:
        import psycopg

        for services in self.services.values():  # every process told at once, then awaited
            for proc in services.procs.values():
                if proc.poll() is None:
                    proc.terminate()
        for services in self.services.values():
            services.stop_all()
        self.fake.stop()
        with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
            for name in [self.template, *self.databases.values()]:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _copy(conn: Any, template: str, name: str) -> None:
    """CREATE DATABASE name TEMPLATE template, once the template's last connection (the
    manage.py that just exited) is gone: PostgreSQL copies a database nobody is connected to."""
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        try:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            return
        except psycopg.errors.ObjectInUse:
            check(time.monotonic() < deadline, f"{template} is still in use")
            time.sleep(0.2)


def _wait_for_log(services: Any, name: str, text: str, proc: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in services.output(name):
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited: {services.output(name)[-3000:]}")
        check(time.monotonic() < deadline, f"{name} did not log {text!r} in {timeout:g} s")
        time.sleep(0.2)


async def _pause(api: Integrator, client: httpx.AsyncClient, web: str, n: int) -> list[int]:
    """n turns of n sessions whose call waits for an approval; returns once all wait."""
    turns = []
    for _ in range(n):
        sid = await api.session(client, web)
        r = await client.post(
            f"{web}/api/v1/sessions/{sid}/turns/", json={"message": MAIL}, headers=api.headers
        )
        check(r.status_code == 202, f"post: {r.status_code} {r.text[:300]}")
        turns.append(int(r.json()["id"]))
    deadline = time.monotonic() + 120
    while await _statuses(api, client, web, turns) != {"awaiting_approval"}:
        check(time.monotonic() < deadline, "the turns did not all wait for an approval")
        await asyncio.sleep(0.2)
    return turns


async def _statuses(
    api: Integrator, client: httpx.AsyncClient, web: str, turns: list[int]
) -> set[str]:
    found = set()
    for turn in turns:
        r = await client.get(f"{web}/api/v1/turns/{turn}/", headers=api.headers)
        r.raise_for_status()
        found.add(str(r.json()["status"]))
    return found


async def _hang_stopped(api: Integrator, client: httpx.AsyncClient, web: str, job: int) -> int:
    """A turn whose tool hangs, stopped (`POST /turns/{id}/cancel/`) once `tool.started` says
    the tool runs; returns when the socket says the turn was cancelled."""
    from websockets.asyncio.client import connect

    sid = await api.session(client, web)
    async with connect(api.ws_url(web, sid), additional_headers=api.headers) as socket:
        r = await client.post(
            f"{web}/api/v1/sessions/{sid}/turns/",
            json={"message": f"{JOB} {job}"},
            headers=api.headers,
        )
        check(r.status_code == 202, f"post: {r.status_code} {r.text[:300]}")
        turn, stopped = r.json()["id"], False
        while True:
            event = json.loads(await asyncio.wait_for(socket.recv(), timeout=120))
            if event.get("turn") != turn:
                continue
            if event["type"] == "tool.started" and not stopped:
                r = await client.post(f"{web}/api/v1/turns/{turn}/cancel/", headers=api.headers)
                check(r.status_code == 200, f"cancel: {r.status_code} {r.text[:300]}")
                stopped = True
            elif event["type"] in END_TYPES:
                check(stopped and event["type"] == "turn.cancelled", f"turn {turn}: {event}")
                return int(turn)


async def _load(
    stacks: Stacks, client: httpx.AsyncClient, waiting: int, hung: int
) -> dict[str, list[int]]:
    """The load: `waiting` turns paused on the second stack, `hung` stopped on the third (all at
    once), both on the fourth, and the third's and fourth's workers have abandoned their calls.
    The paused turns' ids, by stack."""
    paused = {
        name: await _pause(stacks.loader, client, stacks.webs[name], waiting)
        for name in ("waiting", "both")
    }
    await asyncio.gather(
        *(
            _hang_stopped(stacks.loader, client, stacks.webs[name], i)
            for name in ("hung", "both")
            for i in range(hung)
        )
    )
    deadline = time.monotonic() + 60
    for name in ("hung", "both"):
        while stacks.abandoned(name) < hung:
            check(time.monotonic() < deadline, f"{stacks.abandoned(name)} of {hung} abandoned")
            await asyncio.sleep(0.1)
    return paused


async def _sample(stacks: Stacks, client: httpx.AsyncClient, name: str, path: str) -> float:
    api, web = stacks.bystander, stacks.webs[name]
    if path == "wait":
        return (await api.wait_turn(client, web, message="hello"))["ms"]
    got = await api.chat(client, web, "hello")
    check(got["ok"] and got["text"] == "ok", f"the bystander's turn on {name}: {got}")
    return got["ms"]


async def _measure(
    stacks: Stacks, rounds: int, per_round: int, waiting: int, hung: int, warm: int = 3
) -> dict[str, Any]:
    samples: dict[str, dict[str, list[float]]] = {n: {p: [] for p in PATHS} for n in STACKS}
    async with httpx.AsyncClient(timeout=300) as client:
        for _ in range(warm):  # warm every process: imports, agno's first run, connections
            for name in STACKS:
                for path in PATHS:
                    await _sample(stacks, client, name, path)
        paused = await _load(stacks, client, waiting, hung)
        for r in range(rounds):
            order = list(STACKS[r % len(STACKS) :] + STACKS[: r % len(STACKS)])
            paths = list(PATHS[r % 2 :] + PATHS[: r % 2])
            for _ in range(per_round):
                for name in order:
                    for path in paths:
                        samples[name][path].append(await _sample(stacks, client, name, path))
        for name, turns in paused.items():
            still = await _statuses(stacks.loader, client, stacks.webs[name], turns)
            check(still == {"awaiting_approval"}, f"the paused turns ended on {name}: {still}")
    return {
        "samples": samples,
        "waiting": len(paused["waiting"]),
        "abandoned": stacks.abandoned("hung"),
        "hung": hung,
    }


def run_bystander(var: Path, *, rounds: int, smoke: bool) -> dict[str, Any]:
    waiting, hung, per_round, warm = (3, 2, 2, 1) if smoke else (20, 8, 5, 3)
    started = time.monotonic()
    stacks = Stacks(var)
    ready = time.monotonic() - started
    try:
        data = asyncio.run(_measure(stacks, rounds, per_round, waiting, hung, warm))
    finally:
        stacks.close()
    data["start_s"] = ready
    s = data["samples"]
    n = len(s["none"]["wait"])
    lines = [
        "## A bystander's turn beside waiting and hung turns: one Celery worker of "
        "concurrency 2, PostgreSQL and Redis",
        "",
        "Four stacks side by side, each as the README deploys it (one daphne; "
        "`celery -A rollback_site worker --concurrency=2`, the prefork pool; beat) with a "
        "PostgreSQL database and a Redis database of its own, alike but for what else they "
        f"hold: nothing; {data['waiting']} turns of another user waiting for an approval; "
        f"{hung} turns whose custom tool hung, each stopped while the tool ran "
        f"({data['abandoned']} calls abandoned in the worker's pool processes); both at once. "
        "Another user's "
        f'"hello" on each, the stacks in a rotating order ({n} samples each); median (p90; '
        f"min{DASH}max).",
        "",
        f"| bystander's turn | nothing else | {data['waiting']} waiting for an approval | "
        f"{hung} hung past Stop | both at once |",
        "| --- | --- | --- | --- | --- |",
    ]
    for path, label in (
        ("wait", 'API, `"wait": true`'),
        ("ws", "API (202), then `turn.finished` on `/ws/v1/` (the page's path)"),
    ):
        cells = " | ".join(spread90(s[name][path]) for name in STACKS)
        lines.append(f"| {label} | {cells} |")
    lines += ["", NOISE]
    targets = []
    for name, what in (
        ("waiting", f"{data['waiting']} turns waiting for an approval"),
        ("hung", f"{hung} tools hung past Stop"),
        ("both", f"{data['waiting']} turns waiting and {hung} tools hung at once"),
    ):
        targets.append(
            slower_target(
                what,
                "one Celery worker of concurrency 2, PostgreSQL and Redis; `wait: true`",
                s[name]["wait"],
                s["none"]["wait"],
            )
        )
    return {"data": data, "markdown": "\n".join(lines), "targets": targets}
