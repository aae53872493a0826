"""Where a worker's turn spends its time: each step timed, in milliseconds, for the line that
reports the turn ("turn finished", `phases_ms`: agents.turn.after.report_turn) and for the
benchmark (bench/turns.py). The steps, in order: `claim` (the turn moved to running), `agent`
(its agent built), `prepare` (its branch and attempt: the MCP servers' tools listed), `memories`,
`fit` (the history fitted into the window), `model` (the model's stream, its tool calls
included), `settle`, `store` (the answer written, in one transaction), `after` (the title).
A step run twice (a request fitted again after the server found it too long) counts both.

The clock is the turn's thread's own (a context variable set by `timing`), so the steps of turns
running side by side on a pool do not mix; a turn of the Python API, which no worker runs, is
not timed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_current: ContextVar[dict[str, float] | None] = ContextVar("rollback_turn_phases", default=None)


@contextmanager
def timing() -> Iterator[dict[str, float]]:
    """Time the steps of the turn run in the block (in this thread)."""
    phases: dict[str, float] = {}
    token = _current.set(phases)
    try:
        yield phases
    finally:
        _current.reset(token)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Count the block's time to step `name` of the turn being timed (nothing when none is)."""
    phases = _current.get()
    if phases is None:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        spent(name, (time.perf_counter() - start) * 1000)


def spent(name: str, ms: float) -> None:
    """Count `ms` to step `name` of the turn being timed."""
    phases = _current.get()
    if phases is not None:
        phases[name] = phases.get(name, 0.0) + ms


def recorded() -> dict[str, float]:
    """The steps timed so far, in milliseconds (rounded to the microsecond); empty when the turn
    is not timed."""
    return {name: round(ms, 3) for name, ms in (_current.get() or {}).items()}
