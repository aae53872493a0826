"""The floor of one API request on the same SQLite file (issue 37): `GET /api/v1/sessions/{id}/`
served by daphne as `make run` serves it; the same application under uvicorn (which could hold
the sockets too); the same Django under gunicorn, one synchronous worker (WSGI: the thread that
parses the request runs Django, no hop; HTTP only), with Django's own time inside that worker;
the same request through Django's test client, in a process of its own (no server, no socket:
Django's own floor, in a loop that never sleeps); a minimal Starlette app under uvicorn that runs
the statements Django ran for that request (the SQL and an ASGI server's path, nothing else);
and a server that answers at once (the client and the socket alone). Interleaved rounds;
medians.

`python -m bench.floor client SESSION KEY` (the test client: reads a sample count per line on
stdin, answers each line with the samples' milliseconds as JSON; its first line out is the
statements one request ran), `python -m bench.floor starlette PORT DATABASE STATEMENTS`,
`python -m bench.floor uvicorn PORT`, `python -m bench.floor gunicorn PORT` (`GET /__floor__`
answers Django's own times since the last such GET) and `python -m bench.floor echo PORT` are
the helper processes, started by `measure_floor` in the served app's environment.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import httpx

from bench.figures import fmt_ms

_PLACEHOLDER = re.compile(r"(?<!%)%s")


def _client(session: int, key: str) -> None:
    """The test client's side: Django set up in this process on the served app's file."""
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.urls import clear_url_caches

    from bench.empty_urls import EMPTY_PATH

    settings.ROOT_URLCONF = "bench.empty_urls"  # the site's addresses and the empty view
    clear_url_caches()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_HOST="127.0.0.1")
    path = f"/api/v1/sessions/{session}/"
    empty = f"/{EMPTY_PATH}"
    for _ in range(20):  # warm: the key in the cache, the code paths
        assert client.get(path).status_code == 200
        assert client.get(empty).status_code == 200
    ran: list[tuple[str, list[Any]]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        ran.append((_PLACEHOLDER.sub("?", sql).replace("%%", "%"), list(params or [])))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        client.get(path)
    print(json.dumps(ran, default=str), flush=True)
    for line in sys.stdin:
        samples: dict[str, list[float]] = {"client": [], "empty": []}
        for _ in range(int(line)):
            for name, address in (("client", path), ("empty", empty)):
                start = time.perf_counter()
                response = client.get(address)
                samples[name].append((time.perf_counter() - start) * 1000)
                assert response.status_code == 200
        print(json.dumps(samples), flush=True)


def _starlette(port: int, database: str, statements: str) -> None:
    """The reference: the same statements on the same file, one connection, answered as JSON."""
    import sqlite3

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    ran = json.loads(Path(statements).read_text())
    db = sqlite3.connect(database, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")

    async def session(request: Request) -> JSONResponse:
        row: dict[str, Any] = {}
        for sql, params in ran:
            cursor = db.execute(sql, params)
            names = [d[0] for d in cursor.description or []]
            found = cursor.fetchone()
            if found is not None:
                row = dict(zip(names, found, strict=True))
        return JSONResponse(row)

    app = Starlette(routes=[Route("/api/v1/sessions/{pk:int}/", session)])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _uvicorn(port: int) -> None:
    """The same ASGI application as `make run` serves, under uvicorn."""
    import uvicorn

    uvicorn.run(
        "rollback_site.asgi:application",
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


def _gunicorn(port: int) -> None:
    """The same Django under gunicorn, one synchronous worker (WSGI), timing Django's own path
    in the worker: `GET /__floor__` answers those times (ms) since the last such GET."""
    from django.core.wsgi import get_wsgi_application
    from gunicorn.app.base import BaseApplication

    django_app = get_wsgi_application()
    times: list[float] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ["PATH_INFO"] == "/__floor__":
            body = json.dumps(times).encode()
            times.clear()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        start = time.perf_counter()
        answer = django_app(environ, start_response)
        body = b"".join(answer)
        close = getattr(answer, "close", None)
        if close is not None:
            close()
        times.append((time.perf_counter() - start) * 1000)
        return [body]

    class Server(BaseApplication):  # type: ignore[misc]  # gunicorn is untyped
        def load_config(self) -> None:
            self.cfg.set("bind", f"127.0.0.1:{port}")
            self.cfg.set("workers", 1)
            self.cfg.set("worker_class", "sync")
            self.cfg.set("loglevel", "warning")

        def load(self) -> Any:
            return app

    Server().run()


def _echo(port: int) -> None:
    """A server that answers every request at once with a small JSON body: the client's and
    the socket's own part of a served request."""
    import asyncio

    answer = b'{"id": 1}'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                writer.write(head % len(answer) + answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


class _ClientProcess:
    def __init__(self, env: dict[str, str], session: int, key: str) -> None:
        cmd = [sys.executable, "-m", "bench.floor", "client", str(session), key]
        env = {**env, "DJANGO_SETTINGS_MODULE": "rollback_site.settings"}
        self.proc = subprocess.Popen(  # noqa: S603 - our own module
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.statements = json.loads(self._line())
        self.empty: list[float] = []  # the empty view's samples, taken beside the session's

    def _line(self) -> str:
        out: IO[str] | None = self.proc.stdout
        line = out.readline() if out is not None else ""
        if not line:
            raise RuntimeError(f"bench.floor client ended ({self.proc.wait()})")
        return line

    def samples(self, n: int) -> list[float]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        got = json.loads(self._line())
        self.empty += [float(x) for x in got["empty"]]
        return [float(x) for x in got["client"]]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _served_samples(url: str, headers: dict[str, str], n: int) -> list[float]:
    out = []
    with httpx.Client(timeout=30) as client:
        for _ in range(n):
            start = time.perf_counter()
            client.get(url, headers=headers).raise_for_status()
            out.append((time.perf_counter() - start) * 1000)
    return out


def measure_floor(
    *,
    env: dict[str, str],
    web: str,
    key: str,
    session: int,
    var: Path,
    rounds: int,
    per_round: int,
) -> dict[str, list[float]]:
    """Samples (ms) of each path, taken in interleaved rounds of `per_round` each, the order
    rotating; `django_in_gunicorn`: Django's own time inside gunicorn's worker, per request."""
    from tests.procs import free_port, wait_until_answers

    client = _ClientProcess(env, session, key)
    statements = var / "floor-statements.json"
    statements.write_text(json.dumps(client.statements))
    database = str(var / "rollback.sqlite3")
    helpers = {
        "starlette": ["starlette", database, str(statements)],
        "uvicorn": ["uvicorn"],
        "gunicorn": ["gunicorn"],
        "echo": ["echo"],
    }
    ports = {name: free_port() for name in helpers}
    procs = {
        name: subprocess.Popen(  # noqa: S603 - our own module
            [sys.executable, "-m", "bench.floor", args[0], str(ports[name]), *args[1:]],
            env={**env, "DJANGO_SETTINGS_MODULE": "rollback_site.settings"},
        )
        for name, args in helpers.items()
    }
    headers = {"Authorization": f"Bearer {key}"}
    path = f"/api/v1/sessions/{session}/"
    url = {name: f"http://127.0.0.1:{port}{path}" for name, port in ports.items()}
    out: dict[str, list[float]] = {name: [] for name in ("served", "client", *helpers)}
    try:
        for name, proc in procs.items():
            wait_until_answers(url[name], proc, timeout=60)
        takers = {
            "served": lambda n: _served_samples(f"{web}{path}", headers, n),
            "client": client.samples,
            **{
                name: (lambda n, name=name: _served_samples(url[name], headers, n))
                for name in helpers
            },
        }
        names = list(takers)
        for name in names:  # warm each
            takers[name](5)
        _django_times(ports["gunicorn"])  # from here on
        for r in range(rounds):
            turn = r % len(names)
            for name in names[turn:] + names[:turn]:
                out[name] += takers[name](per_round)
        out["django_in_gunicorn"] = _django_times(ports["gunicorn"])
    finally:
        client.close()
        for proc in procs.values():
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    out["statements"] = [float(len(client.statements))]
    out["empty"] = client.empty
    return out


def _django_times(port: int) -> list[float]:
    with httpx.Client(timeout=30) as http:
        return [float(x) for x in http.get(f"http://127.0.0.1:{port}/__floor__").json()]


def floor_report(floor: dict[str, list[float]]) -> tuple[list[str], list[Any]]:
    """The section's lines and its target (served ≤ 1.5× the test client)."""
    served, client, reference = (
        statistics.median(floor[k]) for k in ("served", "client", "starlette")
    )
    ratio = served / client

    def row(label: str, key: str) -> list[str]:
        if not floor.get(key):
            return []
        value = statistics.median(floor[key])
        return [f"| {label} | {fmt_ms(value)} | {value / client:.2f}× |"]

    statements = int(floor["statements"][0])
    lines = [
        "## The floor of one request (`GET /sessions/{id}/`, SQLite, the same file)",
        "",
        "| path | median | ratio to the test client |",
        "| --- | --- | --- |",
        f"| served by daphne as `make run` serves it, over HTTP | {fmt_ms(served)} | "
        f"{ratio:.2f}× |",
        *row("the same application under uvicorn (it could hold the sockets too)", "uvicorn"),
        *row(
            "the same Django under gunicorn, one synchronous worker (WSGI: no hop between "
            "threads; it cannot hold the sockets)",
            "gunicorn",
        ),
        *row(
            "Django's own path inside that gunicorn worker (timed around the WSGI call)",
            "django_in_gunicorn",
        ),
        f"| Django's test client (no server, no socket; a loop that never sleeps) | "
        f"{fmt_ms(client)} | 1.00× |",
        f"| a minimal Starlette app under uvicorn, the same {statements} statement(s) on the "
        f"same file | {fmt_ms(reference)} | {reference / client:.2f}× |",
        *row("a server that answers at once (the client and the socket alone)", "echo"),
        *row(
            "an empty DRF view through Django's test client (the middleware, the API's key "
            "authentication, an empty JSON answer)",
            "empty",
        ),
        "",
        f"{len(floor['served'])} samples each, interleaved. The test client's is Django's own "
        "floor (the middleware, DRF, the view and its statements, in one thread); the served "
        "paths add the server, the socket, the client and, under daphne and uvicorn, the "
        "hand-off to the HTTP threads (rollback_site.http_handler); Starlette's is the same "
        "SQL and an ASGI server alone.",
    ]
    target = (
        "a served GET of one session ≤ 1.5× the same request through Django's test client",
        f"{ratio:.2f}× ({fmt_ms(served)} against {fmt_ms(client)}; Starlette {fmt_ms(reference)})",
        ratio <= 1.5,
        "",
    )
    targets: list[Any] = [target]
    if floor.get("empty"):
        empty = statistics.median(floor["empty"])
        targets.append(
            (
                "an empty view ≤ 1 ms (DRF behind the API's authentication, Django's test client)",
                fmt_ms(empty),
                empty <= 1,
                "",
            )
        )
    return lines, targets


if __name__ == "__main__":
    if sys.argv[1] == "client":
        _client(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1] == "starlette":
        _starlette(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "uvicorn":
        _uvicorn(int(sys.argv[2]))
    elif sys.argv[1] == "gunicorn":
        _gunicorn(int(sys.argv[2]))
    elif sys.argv[1] == "echo":
        _echo(int(sys.argv[2]))
    else:
        raise SystemExit(f"bench.floor: no mode {sys.argv[1]!r}")
