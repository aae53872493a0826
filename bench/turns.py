"""Turn overhead in process (the embedded mode: SQLite, in-memory layer, turns on the web
process's pool): a whole turn through the API with `"wait": true`, and through the event stream
(post, then hear `turn.finished`), against a raw `openai` client call to the same zero-delay
fake Chat Completions server; and the time to the first token (`message.delta`) against the raw
stream's first chunk. And a bystander's turn (`"wait": true`) with 8 turns whose custom tool
hangs, each stopped while its tool ran (issue 36: their calls are abandoned on the tool executor,
agents.tool_deadline, and the pool of turn threads is free), beside the same turn without them.
`python -m bench.turns VAR_DIR` is the process; `run_turns` drives it."""

from __future__ import annotations

import logging
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.client import NOISE, slower_target, spread90
from bench.common import DASH, check
from bench.runner import ROOT, System

PROMPT = "Say something short."
PHASE = "phase:"  # a sample's keys for the worker's step timers (agents.turn.phases)
HUNG = 8
WAITING = 20  # turns paused for an approval while the bystander's turn runs
# Released when the process quits: the hung calls' threads end.
RELEASE = threading.Event()


def hang(job: str) -> str:
    """Start a job on the outside system (it never answers)."""
    RELEASE.wait()
    return f"finished {job}"


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
                # Offered to every turn: a tool that hangs (with and without hung calls: the
                # same requests), and one that waits for its owner's approval (the bystander's
                # part pauses turns on it: a paused turn holds no pool thread).
                "AGENT_TOOLS": "bench.turns.hang,tests.agents.approval_tools.send_email",
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
        # The worker's step timers of the timed turn, from its "turn finished" line
        # (`phases_ms`), told from other turns' lines (a twin's stopped or paused turns) by its
        # session. (The answer of a `"wait": true` turn comes once it is stored; the line follows
        # the after-work, on the turn's thread.)
        from core.logs import ContextFilter

        self.timed_session: int | None = None
        self.phases: list[dict[str, float]] = []
        self.phased = threading.Event()
        bench = self

        class Phases(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                found = getattr(record, "phases_ms", None)
                if isinstance(found, dict) and getattr(record, "session_id", None) == (
                    bench.timed_session
                ):
                    bench.phases.append(found)
                    bench.phased.set()

        handler = Phases()
        handler.addFilter(ContextFilter())
        turns_log = logging.getLogger("rollback.turns")
        turns_log.addHandler(handler)
        turns_log.setLevel(logging.INFO)
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
        self.timed_session = sid
        self.phases.clear()
        self.phased.clear()
        start = time.perf_counter()
        response = self.client.post(
            f"/api/v1/sessions/{sid}/turns/",
            {"message": PROMPT, "wait": True},
            content_type="application/json",
        )
        ms = (time.perf_counter() - start) * 1000
        check(response.status_code == 201, str(response.content))
        check(self.phased.wait(10), "no turn line")
        check(len(self.phases) == 1, f"{len(self.phases)} turn lines for one turn")
        return {"ms": ms, **{f"{PHASE}{k}": v for k, v in self.phases[0].items()}}

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

    def hang_stopped(self) -> dict[str, float]:
        """8 turns of 8 sessions whose tool hangs, each stopped once its tool runs; returns once
        all 8 ended and their calls are abandoned (the process's count)."""
        from agents import tool_deadline
        from agents.services import turn_submit
        from core import events
        from sessions_app.models import Session, Turn
        from sessions_app.turns import turn_cancel
        from tests.fakes.chat_server import ToolCall, ToolCalls

        before = tool_deadline.stats()["abandoned"]
        calling: set[int] = set()

        def heard(event: events.Event) -> None:
            if event["type"] == "tool.started":
                calling.add(int(event["turn"]))

        sessions = [self._session() for _ in range(HUNG)]
        self.fake.queue(*[ToolCalls([ToolCall("hang", {"job": f"job{i}"})]) for i in range(HUNG)])
        stops = [events.listen(sid, heard) for sid in sessions]
        try:
            owned = Session.objects.filter(pk__in=sessions)
            turns = [turn_submit(session=s, message="run the job") for s in owned]
            stopped: set[int] = set()
            deadline = time.monotonic() + 60
            while len(stopped) < HUNG or tool_deadline.stats()["abandoned"] < before + HUNG:
                check(time.monotonic() < deadline, f"stopped {len(stopped)} of {HUNG} hung turns")
                for pk in set(calling) - stopped:
                    turn_cancel(turn=Turn.objects.get(pk=pk))
                    stopped.add(pk)
                time.sleep(0.01)
            ids = [t.pk for t in turns]
            while Turn.objects.filter(pk__in=ids, status=Turn.Status.CANCELLED).count() < HUNG:
                check(time.monotonic() < deadline, "the stopped turns did not end")
                time.sleep(0.01)
        finally:
            for stop in stops:
                stop()
        return {"abandoned": float(tool_deadline.stats()["abandoned"])}

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

    def waiting(self) -> int:
        """How many turns wait for an approval."""
        from sessions_app.models import Turn

        return Turn.objects.filter(status=Turn.Status.AWAITING_APPROVAL).count()


def main() -> None:
    from bench.common import serve

    turns = Turns(sys.argv[1])
    try:
        serve(
            {
                "raw": turns.raw,
                "api": turns.api,
                "stream": turns.stream,
                "hang_stopped": turns.hang_stopped,
                "pause": turns.pause,
                "waiting": turns.waiting,
                "quit": lambda: None,
            }
        )
    finally:
        RELEASE.set()


def _median(samples: list[dict[str, float]], key: str) -> float:
    return statistics.median(s[key] for s in samples)


def _spread(samples: list[dict[str, float]], key: str) -> str:
    values = [s[key] for s in samples]
    return f"**{statistics.median(values):.1f} ms** ({min(values):.1f}{DASH}{max(values):.1f})"


def step_medians(samples: list[dict[str, float]]) -> dict[str, float]:
    """The median of each of the worker's step timers, in their order."""
    names = [k for k in samples[0] if k.startswith(PHASE)] if samples else []
    return {k.removeprefix(PHASE): statistics.median(s.get(k, 0.0) for s in samples) for k in names}


def _bystander_targets(samples: dict[str, list[dict[str, float]]]) -> list[Any]:
    """The bystander's turn beside waiting and hung turns against its turn beside nothing."""
    rows = []
    for key, what in (
        ("waiting", f"{WAITING} turns waiting for an approval"),
        ("hung", f"{HUNG} tools hung past Stop"),
        ("both", f"{WAITING} turns waiting and {HUNG} tools hung at once"),
    ):
        with_, without = ([x["ms"] for x in samples[k]] for k in (key, "api"))
        rows.append(
            slower_target(what, "embedded: the web process's pool; `wait: true`", with_, without)
        )
    return rows


def run_turns(var: Path, *, rounds: int, smoke: bool) -> dict[str, Any]:
    var.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["PYTHONPATH"] = str(ROOT)
    system = System("turns", "bench.turns", str(var), env=env)
    # The bystander's twins: the same process, one with 8 calls hung past their turns' Stop,
    # one with WAITING turns paused for an approval (the pool has 4 threads: before issue 36,
    # 4 waiting turns froze it), one with both; their turns interleave with the first's.
    twins = {}
    for twin in ("waiting", "hung", "both"):
        (var / twin).mkdir(exist_ok=True)
        twins[twin] = System(f"turns-{twin}", "bench.turns", str(var / twin), env=env)
    ops = ["raw", "api", "stream", *twins]
    samples: dict[str, list[dict[str, float]]] = {op: [] for op in ops}
    per_round = 3 if smoke else 10
    try:
        abandoned = twins["hung"].call("hang_stopped")["abandoned"]
        check(twins["both"].call("hang_stopped")["abandoned"] >= HUNG, "both: not all hung")
        for twin in ("waiting", "both"):
            waiting = twins[twin].call("pause", n=WAITING)
            check(waiting >= WAITING, f"{twin}: only {waiting} turns waited for an approval")
        for r in range(rounds):
            shift = r % len(ops)
            for _ in range(per_round):
                for op in ops[shift:] + ops[:shift]:
                    if op in twins:
                        samples[op].append(twins[op].call("api"))
                    else:
                        samples[op].append(system.call(op))
        for twin in ("waiting", "both"):
            still = twins[twin].call("waiting")
            check(still >= WAITING, f"{twin}: only {still} turns still wait for an approval")
    finally:
        for one in (system, *twins.values()):
            one.close()
    raw, api, stream = (_median(samples[k], "ms") for k in ("raw", "api", "stream"))
    raw_first, stream_first = (
        _median(samples["raw"], "first_ms"),
        _median(samples["stream"], "first_ms"),
    )
    n = len(samples["raw"])
    steps = step_medians(samples["api"])
    outside = api - sum(steps.values())
    where = (
        "steps of the worker (median): "
        + ", ".join(f"{k} {v:.1f} ms" for k, v in steps.items())
        + f" (the raw call: {raw:.1f} ms); outside them (the request, the hand-off to the "
        f"pool, the wait for the answer): {outside:.1f} ms"
    )
    before_model = ("claim", "agent", "prepare", "memories", "fit")
    first_where = (
        "before the model is asked, the worker's steps take (median) "
        + ", ".join(f"{k} {steps[k]:.1f} ms" for k in before_model if k in steps)
        + "; and the model step adds "
        + f"{steps.get('model', 0.0) - raw:.1f} ms over the raw call (agno, the openai SDK)"
    )
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
            "Where the `\"wait\": true` turn's time goes: the worker's own step timers (its "
            "`turn finished` line's `phases_ms`, agents/turn/phases.py), median of each:",
            "",
            "| " + " | ".join([*steps, "outside the steps", "whole turn"]) + " |",
            "| " + " | ".join(["---"] * (len(steps) + 2)) + " |",
            "| "
            + " | ".join([*(f"{v:.2f} ms" for v in steps.values()), f"{outside:.1f} ms"])
            + f" | {api:.1f} ms |",
            "",
            f"The model step against the raw call: {steps.get('model', 0.0) - raw:+.1f} ms "
            "(agno's run and the reply's stream around the same request).",
            "",
            f'A bystander\'s turn (`"wait": true`, the pool of TURN_THREADS turn threads) beside '
            f"nothing else, beside {WAITING} turns waiting for an approval (a waiting turn holds "
            f"no thread), and beside {HUNG} turns whose custom tool hangs, each stopped while its "
            f"tool ran ({abandoned:.0f} calls abandoned on the tool executor), and beside both "
            f"at once: four processes of their own, interleaved ({len(samples['hung'])} samples "
            f"each; median (p90; min{DASH}max)):",
            "",
            f"| bystander's turn | nothing else | {WAITING} waiting for an approval | "
            f"{HUNG} hung past Stop | both at once |",
            "| --- | --- | --- | --- | --- |",
            "| whole turn | "
            + " | ".join(spread90([x["ms"] for x in samples[k]]) for k in ("api", *twins))
            + " |",
            "",
            NOISE,
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
                where if api - raw > 10 else "",
            ),
            (
                "added to a zero-latency model call ≤ 10 ms, Django's test client (events)",
                f"{stream - raw:.1f} ms",
                stream - raw <= 10,
                where if stream - raw > 10 else "",
            ),
            *_bystander_targets(samples),
            (
                "added to the first token ≤ 5 ms, Django's test client (events in process)",
                f"{stream_first - raw_first:.1f} ms",
                stream_first - raw_first <= 5,
                first_where if stream_first - raw_first > 5 else "",
            ),
        ],
    }


if __name__ == "__main__":
    main()
