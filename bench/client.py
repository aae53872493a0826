"""The benchmark as an integrator sees Rollback: HTTP requests with an API key and `/ws/v1/`
sockets against a served process (only the public contract, /work/shared/api-contract.md),
beside a raw `openai` client on the same fake model server."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import statistics
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, TypedDict

import httpx

from bench.common import DASH, role, text

END_TYPES = ("turn.finished", "turn.failed", "turn.cancelled")


class Chat(TypedDict):
    ms: float
    first_ms: float
    ok: bool
    text: str
    seqs: list[int]
    gaps: list[float]
    bytes: int
    events: int


def reply_for(body: dict[str, Any]) -> Any:
    """The fake model's answer: "tokens=N delay=S" streams N tokens S seconds apart; "message
    i: ..." (bench.common.text) is answered with message i + 1; anything else with "ok"."""
    from tests.fakes.chat_server import Reply, last_user_text

    asked = last_user_text(body) or ""
    numbered = re.match(r"message (\d+): ", asked)
    if numbered:
        return Reply(text(int(numbered.group(1)) + 1))
    found = re.search(r"tokens=(\d+) delay=([\d.]+)", asked)
    if not found:
        return Reply("ok")
    n, delay = int(found.group(1)), float(found.group(2))
    return Reply(expected(n), delay=delay)


def expected(n: int) -> str:
    return "".join(f"t{i} " for i in range(1, n + 1))


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def spread(values: list[float]) -> str:
    return f"**{statistics.median(values):.1f} ms** ({min(values):.1f}{DASH}{max(values):.1f})"


NOISE = (
    "The targets give how much slower the bystander's turn is beside the others than beside "
    "nothing, with the 95% interval of that difference (a bootstrap of the samples): the noise "
    "the machine adds, against which the 10 ms bound is judged."
)


def _interval(with_: list[float], without: list[float], stat: Any) -> tuple[float, float]:
    """The 95% interval of stat(with_) - stat(without): a bootstrap of 2,000 resamples of each,
    seeded (the same samples give the same interval)."""
    import random

    rng = random.Random(0)  # noqa: S311 - a resampling, not a secret
    gaps = sorted(
        stat(rng.choices(with_, k=len(with_))) - stat(rng.choices(without, k=len(without)))
        for _ in range(2000)
    )
    return gaps[50], gaps[1949]


def slower_target(
    what: str, where: str, with_: list[float], without: list[float]
) -> tuple[Any, ...]:
    """The target that the bystander's turn with `what` (samples `with_`) is at most 10 ms
    slower than without (`without`), on the medians, measured `where`: the differences of the
    medians and of the 90th percentiles, each with its 95% interval, the noise the samples
    carry. A miss whose interval holds 0 says so."""

    def p90(values: list[float]) -> float:
        return pct(values, 90)

    parts, gap, low = [], 0.0, 0.0
    for name, stat in (("median", statistics.median), ("p90", p90)):
        low_, high = _interval(with_, without, stat)
        value = stat(with_) - stat(without)
        if name == "median":
            gap, low = value, low_
        parts.append(f"{name} {value:+.1f} ms (95% interval {low_:+.1f} to {high:+.1f})")
    why = "no slower beyond the noise: the median's 95% interval holds 0" if low <= 0 else ""
    return (
        f"a bystander's turn with {what} ≤ 10 ms slower than without ({where})",
        "; ".join(parts),
        gap <= 10,
        why if gap > 10 else "",
    )


def spread90(values: list[float]) -> str:
    """The median, the 90th percentile and the range: a bystander's turn, whose tail matters."""
    return (
        f"**{statistics.median(values):.1f} ms** (p90 {pct(values, 90):.1f}; "
        f"{min(values):.1f}{DASH}{max(values):.1f})"
    )


def overhead(samples: dict[str, Any]) -> tuple[dict[str, float], list[str]]:
    """What a turn adds to the raw `openai` call (medians of the interleaved samples: `raw`,
    `wait` and `ws`), and the table that shows it."""
    raw = statistics.median(x["ms"] for x in samples["raw"])
    raw_first = statistics.median(x["first_ms"] for x in samples["raw"])
    wait = statistics.median(x["ms"] for x in samples["wait"])
    ws = statistics.median(x["ms"] for x in samples["ws"])
    ws_first = statistics.median(x["first_ms"] for x in samples["ws"])
    added = {"wait": wait - raw, "ws": ws - raw, "first": ws_first - raw_first}
    table = [
        "| path | whole turn | first token | added to the raw call |",
        "| --- | --- | --- | --- |",
        f"| raw `openai` call (stream) | {spread([x['ms'] for x in samples['raw']])} | "
        f"{spread([x['first_ms'] for x in samples['raw']])} | — |",
        f'| API, `"wait": true` | {spread([x["ms"] for x in samples["wait"]])} | — | '
        f"**{added['wait']:.1f} ms** |",
        f"| API (202), events on `/ws/v1/` | {spread([x['ms'] for x in samples['ws']])} | "
        f"{spread([x['first_ms'] for x in samples['ws']])} | **{added['ws']:.1f} ms** "
        f"(first token: **{added['first']:.1f} ms**) |",
    ]
    return added, table


def import_document(n: int) -> dict[str, Any]:
    """A session export (the contract's `POST /sessions/import/` document) of n messages."""
    return {
        "format": "rollback.session",
        "version": 1,
        "session": {"name": f"bench {n}"},
        "branches": [
            {
                "id": 1,
                "is_current": True,
                "messages": [
                    {"position": i, "role": role(i), "content": text(i)} for i in range(n)
                ],
            }
        ],
    }


@dataclass
class Integrator:
    key: str
    model_url: str
    headers: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        from openai import OpenAI

        self.headers = {"Authorization": f"Bearer {self.key}"}
        self.raw_client = OpenAI(base_url=self.model_url, api_key="bench", max_retries=0)

    def raw(self) -> dict[str, float]:
        """A raw `openai` streaming call to the same fake server."""
        start = time.perf_counter()
        first = None
        for chunk in self.raw_client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter()
        end = time.perf_counter()
        return {"ms": (end - start) * 1000, "first_ms": ((first or end) - start) * 1000}

    async def session(self, client: httpx.AsyncClient, web: str) -> int:
        r = await client.post(
            f"{web}/api/v1/sessions/", json={"name": "bench"}, headers=self.headers
        )
        r.raise_for_status()
        return int(r.json()["id"])

    async def wait_turn(
        self, client: httpx.AsyncClient, web: str, sid: int | None = None, message: str = "hi"
    ) -> dict[str, float]:
        sid = sid if sid is not None else await self.session(client, web)
        start = time.perf_counter()
        r = await client.post(
            f"{web}/api/v1/sessions/{sid}/turns/",
            json={"message": message, "wait": True},
            headers=self.headers,
        )
        ms = (time.perf_counter() - start) * 1000
        if r.status_code != 201:
            raise RuntimeError(f"wait: {r.status_code} {r.text[:300]}")
        return {"ms": ms}

    def ws_url(self, web: str, sid: int) -> str:
        return web.replace("http://", "ws://") + f"/ws/v1/sessions/{sid}/"

    async def chat(
        self,
        client: httpx.AsyncClient,
        web: str,
        message: str,
        post_to: str | None = None,
        sid: int | None = None,
    ) -> Chat:
        """Open the session's socket, post a turn, collect its events until it ends. The reply
        is `turn.snapshot`'s text (when the socket gets one) and then the deltas after its
        `seq`, as the contract's browser does."""
        from websockets.asyncio.client import connect

        sid = sid if sid is not None else await self.session(client, web)
        deltas: list[tuple[float, str, int | None]] = []
        snapshot = ""
        snapshot_seq = -1
        frame_bytes = events = 0
        end = start = 0.0
        async with connect(
            self.ws_url(web, sid), additional_headers=self.headers, open_timeout=60, max_size=None
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
                raw = await asyncio.wait_for(socket.recv(), timeout=180)
                now = time.perf_counter()
                frame_bytes += len(raw.encode() if isinstance(raw, str) else raw)
                event = json.loads(raw)
                if event.get("turn") != turn:
                    continue
                events += 1
                if event["type"] == "turn.snapshot":
                    snapshot, snapshot_seq = event.get("text", ""), int(event.get("seq", -1))
                elif event["type"] == "message.delta":
                    seq = event.get("seq")
                    if seq is not None and int(seq) <= snapshot_seq:
                        continue  # already in the snapshot
                    deltas.append((now, event["delta"], seq))
                elif event["type"] in END_TYPES:
                    end_type, end = event["type"], now
        seqs = [s for _, _, s in deltas if s is not None]
        return {
            "ms": (end - start) * 1000,
            "first_ms": ((deltas[0][0] if deltas else end) - start) * 1000,
            "ok": end_type == "turn.finished",
            "text": snapshot + "".join(d for _, d, _ in deltas),
            "seqs": seqs,
            "gaps": [(b[0] - a[0]) * 1000 for a, b in itertools.pairwise(deltas)],
            "bytes": frame_bytes,
            "events": events,
        }

    # --- history, checkpoints, restores -------------------------------------------------------

    async def import_session(self, client: httpx.AsyncClient, web: str, n: int) -> int:
        r = await client.post(
            f"{web}/api/v1/sessions/import/", json=import_document(n), headers=self.headers
        )
        if r.status_code != 201:
            raise RuntimeError(f"import: {r.status_code} {r.text[:300]}")
        return int(r.json()["id"])

    async def read_history(
        self, client: httpx.AsyncClient, web: str, sid: int, expect: int
    ) -> dict[str, float]:
        """The whole history, in pages of 1,000 (the contract's largest), following `next`."""
        url: str | None = f"{web}/api/v1/sessions/{sid}/messages/?limit=1000"
        got = 0
        start = time.perf_counter()
        while url:
            r = await client.get(url, headers=self.headers)
            r.raise_for_status()
            page = r.json()
            got += len(page["results"])
            url = page.get("next")
        ms = (time.perf_counter() - start) * 1000
        if got != expect:
            raise RuntimeError(f"history: {got} messages, expected {expect}")
        return {"ms": ms}

    async def checkpoint(self, client: httpx.AsyncClient, web: str, sid: int) -> dict[str, Any]:
        start = time.perf_counter()
        r = await client.post(
            f"{web}/api/v1/sessions/{sid}/checkpoints/",
            json={"name": "bench"},
            headers=self.headers,
        )
        ms = (time.perf_counter() - start) * 1000
        if r.status_code != 201:
            raise RuntimeError(f"checkpoint: {r.status_code} {r.text[:300]}")
        return {"ms": ms, "id": int(r.json()["id"])}

    async def get_session(self, client: httpx.AsyncClient, web: str, sid: int) -> dict[str, float]:
        """`GET /sessions/{id}/`: the floor of any request to the API (daphne, the key, DRF)."""
        start = time.perf_counter()
        r = await client.get(f"{web}/api/v1/sessions/{sid}/", headers=self.headers)
        ms = (time.perf_counter() - start) * 1000
        r.raise_for_status()
        return {"ms": ms}

    async def restore(self, client: httpx.AsyncClient, web: str, cp: int) -> dict[str, float]:
        start = time.perf_counter()
        r = await client.post(
            f"{web}/api/v1/checkpoints/{cp}/restore/", json={"mode": "branch"}, headers=self.headers
        )
        ms = (time.perf_counter() - start) * 1000
        if r.status_code != 200:
            raise RuntimeError(f"restore: {r.status_code} {r.text[:300]}")
        return {"ms": ms}

    # --- load ---------------------------------------------------------------------------------

    async def bystander(
        self, client: httpx.AsyncClient, web: str, sid: int, stop: asyncio.Event
    ) -> list[float]:
        """GET the session, one request after another, until `stop`: each one's latency."""
        took: list[float] = []
        while not stop.is_set():
            start = time.perf_counter()
            r = await client.get(f"{web}/api/v1/sessions/{sid}/", headers=self.headers)
            took.append((time.perf_counter() - start) * 1000)
            r.raise_for_status()
            await asyncio.sleep(0.02)
        return took

    async def hold_sockets(
        self, stack: AsyncExitStack, web: str, sids: list[int], n: int
    ) -> list[Any]:
        """Open n sockets (spread over the sessions `sids`), a few at a time, and keep them."""
        from websockets.asyncio.client import connect

        sockets: list[Any] = []
        batch = 50
        for first in range(0, n, batch):
            opened = await asyncio.gather(
                *(
                    stack.enter_async_context(
                        connect(
                            self.ws_url(web, sids[i % len(sids)]),
                            additional_headers=self.headers,
                            open_timeout=60,
                            ping_interval=None,
                        )
                    )
                    for i in range(first, min(n, first + batch))
                )
            )
            sockets.extend(opened)
        return sockets
