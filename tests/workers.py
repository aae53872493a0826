"""A Redis database per pytest-xdist worker, set before Django reads its settings.

Loaded as a plugin (`-p tests.workers` in pyproject's addopts), so this module runs while pytest
parses its arguments: after xdist named the worker (PYTEST_XDIST_WORKER) and before pytest-django
imports the settings, which read REDIS_URL once. Every worker has a test database of its own
(pytest-django's suffix), so two workers make rows with the same ids: on one Redis database their
sessions' channel groups, turns' streams and wake channels would be the same keys, and one
worker's `cache.clear()` (a FLUSHDB) would empty the other's. ROLLBACK_TEST_REDIS_DBS lists one
database number per worker (`15,14`: gw0 on 15, gw1 on 14); REDIS_URL keeps its host and port.
Without xdist, or without REDIS_URL, nothing changes.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

VARIABLE = "ROLLBACK_TEST_REDIS_DBS"


def worker_redis_url(url: str, worker: str, dbs: str) -> str:
    """REDIS_URL for xdist worker `worker` (gw0, gw1, ...), on its database from `dbs`."""
    numbers = [n.strip() for n in dbs.split(",") if n.strip()]
    index = int(worker.removeprefix("gw"))
    if index >= len(numbers):
        raise SystemExit(
            f"{VARIABLE}={dbs!r} names {len(numbers)} Redis databases: one per xdist worker is"
            f" needed, and {worker} has none (run fewer workers with -n, or name more)"
        )
    return urlunsplit(urlsplit(url)._replace(path=f"/{numbers[index]}"))


def _configure() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    url = os.environ.get("REDIS_URL", "")
    if not worker or not url.startswith("redis"):
        return
    dbs = os.environ.get(VARIABLE, "")
    if not dbs:
        raise SystemExit(
            f"pytest -n with REDIS_URL needs {VARIABLE} (one Redis database per worker, e.g. 15,14)"
        )
    os.environ["REDIS_URL"] = worker_redis_url(url, worker, dbs)


_configure()
