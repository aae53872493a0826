"""Turn overhead in process (the embedded mode: SQLite, in-memory layer, turns on the web
process's pool): a whole turn through the API with `"wait": true`, and through the event stream
(post, then hear `turn.finished`), against a raw `openai` client call to the same zero-delay
fake Chat Completions server; and the time to the first token (`message.delta`) against the raw
stream's first chunk. `python -m bench.turns VAR_DIR` is the process; `run_turns` drives it."""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import DASH, check
from bench.runner import ROOT, System

PROMPT = "Say something short."
WAITING = 20  # turns paused for an approval while the bystander's turn runs


class Turns:
    def __init__(self, var_dir: str) -> None:
        from tests.fakes.chat_server import FakeChatServer

        self.fake = FakeChatServer().start()
        os.environ.update(
            {
                "ROLLBACK_VAR_DIR": var_dir,
                "OPENAI_BASE_URL": self.fake.base_url,
                "OPENAI_API_KEY": "bench",
                "AGENT_MODEL": "fake-model",
                "AGENT_MAX_RETRIES": "0",
                "AGNO_TELEMETRY": "false",
                "DJANGO_SETTINGS_MODULE": "rollback_site.settings",
                "DJANGO_ALLOWED_HOSTS": "testserver,127.0.0.1",
                # A tool that waits for its owner's approval: the bystander's part pauses turns
                # on it (issue 36: a paused turn holds no pool thread).
                "AGENT_TOOLS": "tests.agents.approval_tools.send_email",
            }
        )
        for name in ("DATABASE_URL", "REDIS_URL"):
            os.environ.pop(name, None)
        import django

        from bench.hooks import install_from_env

        install_from_env()  # SQLite at the benchmark's stated durability
        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from django.test import Client
        from openai import OpenAI

        from accounts.models import User
        from accounts.services import apikey_create

        self.user = User.objects.create_user("bench")
        _, secret = apikey_create(user=self.user, name="bench")
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
        self.raw_client = OpenAI(base_url=self.fake.base_url, api_key="bench", max_retries=0)
        self.warm()

    def warm(self) -> None:
        for _ in range(3):
            self.raw()
            self.api()

    def _session(self) -> int:
        from sessions_app.services import session_create

        return session_create(owner=self.user, name="bench").pk

    def raw(self) -> dict[str, float]:
        start = time.perf_counter()
        first = None
        stream = self.raw_client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": PROMPT}], stream=True
        )
        for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter()
        end = time.perf_counter()
        return {"ms": (end - start) * 1000, "first_ms": ((first or end) - start) * 1000}

    def api(self) -> dict[str, float]:
        sid = self._session()
        start = time.perf_counter()
        response = self.client.post(
            f"/api/v1/sessions/{sid}/turns/",
            {"message": PROMPT, "wait": True},
            content_type="application/json",
        )
        ms = (time.perf_counter() - start) * 1000
        check(response.status_code == 201, str(response.content))
        return {"ms": ms}

    def stream(self) -> dict[str, float]:
        """Post the turn (202), then hear its events as the session's sockets do."""
        from core import events

        sid = self._session()
        first: list[float] = []
        done = threading.Event()

        def heard(event: events.Event) -> None:
            if event["type"] == "message.delta" and not first:
                first.append(time.perf_counter())
            if event["type"] in ("turn.finished", "turn.failed"):
                done.set()

        stop = events.listen(sid, heard)
        try:
            start = time.perf_counter()
            response = self.client.post(
                f"/api/v1/sessions/{sid}/turns/",
                {"message": PROMPT},
                content_type="application/json",
            )
            check(response.status_code == 202, str(response.content))
            check(done.wait(30), "no turn.finished")
            end = time.perf_counter()
        finally:
            stop()
        return {"ms": (end - start) * 1000, "first_ms": ((first or [end])[0] - start) * 1000}

    def pause(self, n: int) -> int:
        """Start `n` turns, each in a session of its own, whose model asks for a call that needs
        approval; return once they all wait (the number waiting)."""
        from sessions_app.models import Turn
        from tests.fakes.chat_server import ToolCall, ToolCalls

        for i in range(n):
            self.fake.queue(
                ToolCalls([ToolCall("send_email", {"to": "a@b.c", "subject": "x"}, id=f"c{i}")])
            )
            response = self.client.post(
                f"/api/v1/sessions/{self._session()}/turns/",
                {"message": "mail"},
                content_type="application/json",
            )
            check(response.status_code == 202, str(response.content))
        deadline = time.monotonic() + 60
        waiting = Turn.objects.filter(status=Turn.Status.AWAITING_APPROVAL)
        while waiting.count() < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return waiting.count()


def main() -> None:
    from bench.common import serve

    turns = Turns(sys.argv[1])
    serve(
        {
            "raw": turns.raw,
            "api": turns.api,
            "stream": turns.stream,
            "pause": turns.pause,
            "quit": lambda: None,
        }
    )


def _median(samples: list[dict[str, float]], key: str) -> float:
    return statistics.median(s[key] for s in samples)


def _spread(samples: list[dict[str, float]], key: str) -> str:
    values = [s[key] for s in samples]
    return f"**{statistics.median(values):.1f} ms** ({min(values):.1f}{DASH}{max(values):.1f})"


def run_turns(var: Path, *, rounds: int, smoke: bool) -> dict[str, Any]:
    var.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["PYTHONPATH"] = str(ROOT)
    system = System("turns", "bench.turns", str(var), env=env)
    samples: dict[str, list[dict[str, float]]] = {"raw": [], "api": [], "stream": []}
    per_round = 3 if smoke else 10
    try:
        for r in range(rounds):
            ops = ["raw", "api", "stream"]
            ops = ops[r % 3 :] + ops[: r % 3]
            for _ in range(per_round):
                for op in ops:
                    samples[op].append(system.call(op))
        # The bystander: its turn with 0, then with WAITING turns paused for an approval (the
        # embedded pool has 4 threads: before issue 36, 4 waiting turns froze it).
        samples["bystander_0"] = [system.call("api") for _ in range(per_round)]
        waiting = system.call("pause", n=WAITING)
        check(waiting >= WAITING, f"only {waiting} turns waited for an approval")
        samples["bystander_waiting"] = [system.call("api") for _ in range(per_round)]
    finally:
        system.close()
    raw, api, stream = (_median(samples[k], "ms") for k in ("raw", "api", "stream"))
    raw_first, stream_first = (
        _median(samples["raw"], "first_ms"),
        _median(samples["stream"], "first_ms"),
    )
    n = len(samples["raw"])
    markdown = "\n".join(
        [
            "## Turn overhead in process, through Django's test client (embedded: SQLite, "
            "in-memory layer, the web process's pool; no HTTP, no socket)",
            "",
            f"A whole turn against a raw `openai` streaming call to the same zero-delay fake "
            f"server ({n} samples each, interleaved; median (min{DASH}max)).",
            "",
            "| path | whole turn | first token | added to the raw call |",
            "| --- | --- | --- | --- |",
            f"| raw `openai` call (stream) | {_spread(samples['raw'], 'ms')} | "
            f"{_spread(samples['raw'], 'first_ms')} | — |",
            f'| API, `"wait": true` | {_spread(samples["api"], "ms")} | — | '
            f"**{api - raw:.1f} ms** |",
            f"| API (202), then the session's events | {_spread(samples['stream'], 'ms')} | "
            f"{_spread(samples['stream'], 'first_ms')} | **{stream - raw:.1f} ms** "
            f"(first token: **{stream_first - raw_first:.1f} ms**) |",
            "",
            f'A bystander\'s turn (`"wait": true`) with no turn and with {WAITING} turns '
            "waiting for an approval (the embedded pool: 4 threads; a waiting turn holds none). "
            "One Celery worker of concurrency 2 on PostgreSQL + Redis is not measured here.",
            "",
            "| turns waiting for an approval | bystander's whole turn |",
            "| --- | --- |",
            f"| 0 | {_spread(samples['bystander_0'], 'ms')} |",
            f"| {WAITING} | {_spread(samples['bystander_waiting'], 'ms')} |",
        ]
    )
    return {
        "samples": samples,
        "markdown": markdown,
        "targets": [
            (
                "added to a zero-latency model call ≤ 10 ms, Django's test client (`wait: true`)",
                f"{api - raw:.1f} ms",
                api - raw <= 10,
                "",
            ),
            (
                "added to a zero-latency model call ≤ 10 ms, Django's test client (events)",
                f"{stream - raw:.1f} ms",
                stream - raw <= 10,
                "",
            ),
            (
                "added to the first token ≤ 10 ms, Django's test client (events in process)",
                f"{stream_first - raw_first:.1f} ms",
                stream_first - raw_first <= 10,
                "",
            ),
        ],
    }


if __name__ == "__main__":
    main()
