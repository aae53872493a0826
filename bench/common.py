"""What every system of the benchmark shares: the conversation's text, the timer, the bytes
a database holds, and the line protocol between the coordinator and a system's process."""

from __future__ import annotations

import json
import sqlite3
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

# The typography of the results (named, so the source stays plain ASCII).
DASH = "\u2013"  # en dash: a range, min-max
TIMES = "\u00d7"  # multiplication sign: a ratio


class BenchCheckError(RuntimeError):
    """What a benchmark found wrong (a reply with tokens missing, a history too short)."""


def check(condition: bool, message: str = "a benchmark check failed") -> None:
    if not condition:
        raise BenchCheckError(message)


FILLER = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 2


def text(i: int) -> str:
    """Message i of every benchmark conversation (about 120 characters)."""
    return f"message {i}: {FILLER}"


def role(i: int) -> str:
    return "user" if i % 2 == 0 else "assistant"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return (time.perf_counter() - start) * 1000.0, value


def row_bytes(columns: list[str]) -> str:
    """SQLite: the stored size of a row's values (numbers as 8 bytes, text as UTF-8)."""
    return " + ".join(
        f"""(CASE typeof("{c}") WHEN 'null' THEN 0 WHEN 'integer' THEN 8 WHEN 'real' THEN 8 """
        f"""ELSE LENGTH(CAST("{c}" AS BLOB)) END)"""
        for c in columns
    )


def sqlite_bytes(conn: sqlite3.Connection) -> int:
    """The bytes of every row of every table (numbers 8 bytes, text as UTF-8, blobs as they
    are): what a write adds, whatever the page layout."""
    total = 0
    tables = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    for (table,) in tables:
        columns = [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]
        if not columns:
            continue
        (value,) = conn.execute(
            f'SELECT COALESCE(SUM({row_bytes(columns)}), 0) FROM "{table}"'  # noqa: S608 (the catalog's names)
        ).fetchone()
        total += int(value)
    return total


def serve(handlers: dict[str, Callable[..., Any]]) -> None:
    """A system's process: one JSON command a line on stdin ({"op", "args"}), one JSON answer a
    line on stdout ({"ok": value} or {"error": text})."""
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing a library prints may break the protocol
    for line in sys.stdin:
        if not line.strip():
            continue
        command = json.loads(line)
        try:
            answer: dict[str, Any] = {"ok": handlers[command["op"]](**command.get("args", {}))}
        except Exception:
            answer = {"error": traceback.format_exc()}
        out.write(json.dumps(answer) + "\n")
        out.flush()
        if command["op"] == "quit":
            return


def sqlite_disk_bytes(conn: sqlite3.Connection) -> int:
    """The bytes of every page of every table and index (SQLite's dbstat): what the database
    holds on disk for its rows, whatever the WAL has not yet copied back."""
    (value,) = conn.execute("SELECT COALESCE(SUM(pgsize), 0) FROM dbstat").fetchone()
    return int(value)


def sqlite_storage(path: str) -> dict[str, int]:
    """Row bytes and page bytes (tables and indexes) of the SQLite file at `path`."""
    conn = sqlite3.connect(path)
    try:
        return {"bytes": sqlite_bytes(conn), "disk_bytes": sqlite_disk_bytes(conn)}
    finally:
        conn.close()


PG_DISK_BYTES = (
    "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'm')"
)
