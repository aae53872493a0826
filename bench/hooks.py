"""Hooks the benchmark puts into the app's processes from outside, through Django's public
`connection_created` signal (no app code changes):

- every SQLite connection at the durability the benchmark states for every system
  (`PRAGMA synchronous=...`, after the app's own init_command);
- every statement that goes through Django's cursors counted in a file-backed counter (mmap) the
  benchmark reads while the process runs (BEGIN/COMMIT issued by the driver are not counted).

`python -m bench.hooks [serve's arguments]` is `python -m rollback_site.serve` with the hooks, set
by BENCH_SQLITE_SYNCHRONOUS and BENCH_QUERY_COUNTER (a path)."""

from __future__ import annotations

import mmap
import os
import struct
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

_FORMAT = "<Q"


class QueryCounter:
    """A counter of statements, shared through an 8-byte file (this process writes, the
    benchmark reads)."""

    def __init__(self, path: Path) -> None:
        path.write_bytes(b"\0" * struct.calcsize(_FORMAT))
        self._file = path.open("r+b")
        self._map = mmap.mmap(self._file.fileno(), struct.calcsize(_FORMAT))
        self._lock = threading.Lock()

    def wrap(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        with self._lock:
            (n,) = struct.unpack_from(_FORMAT, self._map)
            struct.pack_into(_FORMAT, self._map, 0, n + 1)
        return execute(sql, params, many, context)


def read_counter(path: Path) -> int:
    """The count so far, read by the benchmark."""
    (n,) = struct.unpack(_FORMAT, path.read_bytes()[: struct.calcsize(_FORMAT)])
    return int(n)


def install(synchronous: str | None, counter_path: str | None) -> None:
    from django.db.backends.signals import connection_created

    if synchronous and synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
        raise SystemExit(f"bench: no SQLite synchronous level {synchronous!r}")
    counter = QueryCounter(Path(counter_path)) if counter_path else None

    def on_connect(sender: Any, connection: Any, **kwargs: Any) -> None:
        if synchronous and connection.vendor == "sqlite":
            connection.connection.execute(f"PRAGMA synchronous={synchronous.upper()}")
        # The signal fires at every (re)connection of the same DatabaseWrapper (a request
        # closes its connection, the thread's wrapper opens another): add the counter once, or
        # each statement would be counted once per reconnection so far.
        if counter is not None and counter.wrap not in connection.execute_wrappers:
            connection.execute_wrappers.append(counter.wrap)

    connection_created.connect(on_connect, weak=False)


def install_from_env() -> None:
    install(os.environ.get("BENCH_SQLITE_SYNCHRONOUS"), os.environ.get("BENCH_QUERY_COUNTER"))


def main() -> None:
    install_from_env()
    from rollback_site.serve import main as serve

    serve(sys.argv[1:])


if __name__ == "__main__":
    main()
