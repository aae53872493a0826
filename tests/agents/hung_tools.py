"""Custom tools for the deadline tests (tests.agents.test_tool_deadline), named by their dotted
paths: one that hangs until the test releases it, one with a deadline of its own, and ones that
return what is not a string."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from agents.tools import tool_effect

# Set by the tests' fixture at their end: every hung call returns, and its thread ends.
RELEASE = threading.Event()
CALLS: list[str] = []
_lock = threading.Lock()


def started() -> int:
    with _lock:
        return len(CALLS)


def hang(job: str) -> str:
    """Start a job on the outside system (it never answers until released)."""
    with _lock:
        CALLS.append(job)
    RELEASE.wait(120)
    return f"finished {job}"


@tool_effect("none", timeout=2)
def quick_lookup(order_id: str) -> str:
    """Look an order up (its own deadline: 2 s; it hangs)."""
    with _lock:
        CALLS.append(order_id)
    RELEASE.wait(120)
    return "shipped"


@dataclass
class Order:
    id: str
    items: list[str]


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque thing>"


RESULTS: dict[str, object] = {
    "dict": {"id": "A1", "total": 3.5, "tags": ["x"]},
    "list": [1, 2, {"three": None}],
    "number": 42,
    "nothing": None,
    "bytes": "héllo".encode(),
    "binary": b"\xff\xfe\x00",
    "object": Opaque(),
    "big": ["word"] * 10_000,
}


@tool_effect("none")
def give(kind: str) -> object:
    """Return a value of the given kind."""
    return RESULTS[kind]
