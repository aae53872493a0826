"""The figures of a benchmark's samples: the systems' names, the samples' median, min and max, and
how times and sizes are written."""

from __future__ import annotations

import statistics
from typing import Any

NAMES = {
    "rollback-sqlite": "Rollback (SQLite)",
    "rollback-postgres": "Rollback (PostgreSQL)",
    "langgraph": "LangGraph SqliteSaver",
    "agno": "agno SqliteDb",
    "seed": "seed design (JSON copy)",
}


def stats(samples: list[dict[str, float]], key: str = "ms") -> tuple[float, float, float, int]:
    values = [s[key] for s in samples if key in s]
    return statistics.median(values), min(values), max(values), len(values)


def fmt_ms(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    if value >= 100:
        return f"{value:.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms"


def fmt_bytes(value: float) -> str:
    value = float(value)
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def med(store: dict[str, Any], bench: str, name: str, size: int, key: str = "ms") -> float | None:
    samples = store.get(bench, {}).get(name, {}).get(str(size))
    if not samples:
        return None
    return stats(samples, key)[0]
