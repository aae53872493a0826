"""Is the site up? The checks behind /healthz, and the heartbeats of the Celery processes.

Each check answers with a `Check`: the database (one `SELECT 1`), the cache (one write and one
read, which also fetches the heartbeats), with DEBUG off the static files (collectstatic's
manifest, which every page needs to name its files) and, when Celery is configured (not eager:
REDIS_URL is set), the age of the newest heartbeat of any worker and of beat. Besides the
checks, the report says how many messages the channel layer has dropped (`channel_layer`,
counted by core.channel_layers in the cache, read with the heartbeats). A worker records
its heartbeat from `ops.heartbeat.WorkerHeartbeat`, beat from `ops.beat.Scheduler.tick`, both
through `heartbeat_record`.

Every check is bounded by HEALTH_CHECK_TIMEOUT: the database through the pool's own wait (a
connection lent within the timeout, or none), the cache through the "health" cache alias, whose
Redis client gives up as soon. Errors are summarised ("unreachable"): the report is public, and
a driver's message names hosts and ports; the full error is logged when a part starts failing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Required, TypedDict

import psycopg
import redis.exceptions
from django.conf import settings
from django.contrib.staticfiles.storage import ManifestFilesMixin
from django.core.cache import caches
from django.core.files.storage import storages
from django.db import DatabaseError, connection
from psycopg_pool import PoolTimeout

from agents.tool_deadline import ToolStats
from agents.tool_deadline import stats as tool_stats
from agents.tool_reports import reported, this_node
from core.channel_layers import DROPS_KEY
from sandbox.availability import availability

log = logging.getLogger(__name__)

CACHE_ALIAS = "health"
PROBE_KEY = "ops:health:probe"
WORKER_KEY = "ops:health:worker"
BEAT_KEY = "ops:health:beat"
# A heartbeat is kept a day: long enough to tell "silent for hours" from "never seen".
HEARTBEAT_TTL = 24 * 3600


class CheckJSON(TypedDict, total=False):
    """One part in /healthz's body: `ok` always, the others when known."""

    ok: Required[bool]
    ms: float
    age_seconds: float
    error: str


class ChannelLayerJSON(TypedDict):
    """How many messages the channel layer dropped, in every process since the count began
    (None: the cache did not answer). Not a check: a socket reads what it missed back."""

    dropped: int | None


class ElsewhereJSON(TypedDict):
    abandoned: int
    max_abandoned: int
    full: bool


class ToolsJSON(TypedDict):
    """This process's tool calls given up on (agents.tool_deadline): still running past their
    deadline or a Stop (`abandoned`), since the process started (`abandoned_total`), the most
    it keeps (`max_abandoned`, AGENT_TOOL_MAX_ABANDONED), and whether it is at that most
    (`full`: new custom and MCP calls are refused at once). Not a check: the server still
    serves, and a refused call says why to the model and the page."""

    abandoned: int
    abandoned_total: int
    max_abandoned: int
    full: bool
    # The other processes that hold abandoned calls now (a Celery worker's, another web
    # process's: agents.tool_reports), each with its count and whether it is full; None when
    # the cache did not answer.
    elsewhere: list[ElsewhereJSON] | None


class ReportJSON(TypedDict):
    """/healthz's body."""

    status: Literal["ok", "fail"]
    celery: str
    checks: dict[str, CheckJSON]
    channel_layer: ChannelLayerJSON
    tools: ToolsJSON
    sandbox: SandboxJSON


class SandboxJSON(TypedDict):
    """Whether this process can run the agent's sandboxed shell (sandbox.availability): without
    it, run_shell and run_tests are not offered. Not a check: /healthz stays 200 without it."""

    available: bool
    why: str


@dataclass(frozen=True)
class Check:
    """One part's state. `ms`: how long the check took; `age_seconds`: of the newest heartbeat."""

    ok: bool
    ms: float | None = None
    age_seconds: float | None = None
    error: str | None = None
    cause: BaseException | None = field(default=None, compare=False)  # logged, never shown

    def as_json(self) -> CheckJSON:
        shown: CheckJSON = {"ok": self.ok}
        if self.ms is not None:
            shown["ms"] = self.ms
        if self.age_seconds is not None:
            shown["age_seconds"] = self.age_seconds
        if self.error is not None:
            shown["error"] = self.error
        return shown


@dataclass(frozen=True)
class Report:
    checks: dict[str, Check]
    celery: bool
    dropped: int | None = None  # messages the channel layer dropped (core.channel_layers)
    tools: ToolStats | None = None  # this process's abandoned tool calls (agents.tool_deadline)
    # The other processes' (agents.tool_reports); None: the cache did not answer.
    elsewhere: list[ElsewhereJSON] | None = None

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks.values())

    def as_json(self) -> ReportJSON:
        return {
            "status": "ok" if self.ok else "fail",
            "celery": "configured" if self.celery else "not configured (tasks run in process)",
            "checks": {name: check.as_json() for name, check in self.checks.items()},
            "channel_layer": {"dropped": self.dropped},
            "tools": tools_json(
                self.tools if self.tools is not None else tool_stats(), self.elsewhere
            ),
            "sandbox": sandbox_json(),
        }


def sandbox_json() -> SandboxJSON:
    found = availability()
    return {"available": found.ok, "why": found.why}


def tools_json(stats: ToolStats, elsewhere: list[ElsewhereJSON] | None = None) -> ToolsJSON:
    return {
        "abandoned": stats["abandoned"],
        "abandoned_total": stats["abandoned_total"],
        "max_abandoned": stats["max_abandoned"],
        "full": stats["abandoned"] >= stats["max_abandoned"],
        "elsewhere": elsewhere,
    }


def tools_elsewhere() -> list[ElsewhereJSON] | None:
    """The other processes holding abandoned tool calls now, as they reported them."""
    try:
        found = reported(but=this_node())
    except Exception:
        return None
    return [
        {
            "abandoned": int(e["abandoned"]),
            "max_abandoned": int(e["max_abandoned"]),
            "full": int(e["abandoned"]) >= int(e["max_abandoned"]),
        }
        for e in found
    ]


def celery_configured() -> bool:
    """Tasks go to Celery workers through a broker (REDIS_URL), rather than run in process."""
    return not settings.CELERY_TASK_ALWAYS_EAGER


def report() -> Report:
    """Every check, in order; the parts that depend on the cache fail with it."""
    checks = {"database": check_database()}
    cache_check, heartbeats = check_cache()
    checks["cache"] = cache_check
    if isinstance(storages["staticfiles"], ManifestFilesMixin):
        checks["static"] = check_static()
    celery = celery_configured()
    if celery:
        now = time.time()
        for part, key, max_age in (
            ("worker", WORKER_KEY, settings.HEALTH_WORKER_MAX_AGE),
            ("beat", BEAT_KEY, settings.HEALTH_BEAT_MAX_AGE),
        ):
            if not cache_check.ok:
                checks[part] = Check(ok=False, error="unknown: the cache did not answer")
            else:
                checks[part] = check_heartbeat(heartbeats.get(key), max_age=max_age, now=now)
    _log_changes(checks)
    dropped = heartbeats.get(DROPS_KEY, 0) if cache_check.ok else None
    return Report(
        checks=checks,
        celery=celery,
        dropped=dropped if isinstance(dropped, int) else None,
        tools=tool_stats(),
        elsewhere=tools_elsewhere() if cache_check.ok else None,
    )


def check_database() -> Check:
    """`SELECT 1` on a connection of the default database. On PostgreSQL the connection comes
    from the process's pool, waiting at most HEALTH_CHECK_TIMEOUT for one (the server down or
    every connection busy): Django's own request for one would wait DATABASE_POOL_TIMEOUT."""
    started = time.monotonic()
    try:
        pool = getattr(connection, "pool", None)
        if pool is not None:
            pool.open()  # at once: the pool connects in the background
            with pool.connection(timeout=settings.HEALTH_CHECK_TIMEOUT) as conn:
                conn.execute("SELECT 1")
        else:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
    except PoolTimeout as exc:
        return _failed(f"no connection within {_seconds()}", exc, started)
    except (psycopg.OperationalError, DatabaseError) as exc:
        return _failed("unreachable", exc, started)
    except Exception as exc:  # any other failure is a failed check, not a 500
        return _failed(f"failed ({type(exc).__name__})", exc, started)
    return Check(ok=True, ms=_ms(started))


def check_cache() -> tuple[Check, dict[str, Any]]:
    """Write a value and read the heartbeats back, through the "health" alias (short timeouts).
    A cache that answers reads but refuses writes (full, read-only) fails too."""
    cache = caches[CACHE_ALIAS]
    started = time.monotonic()
    try:
        cache.set(PROBE_KEY, time.time(), timeout=60)
        found = cache.get_many([PROBE_KEY, WORKER_KEY, BEAT_KEY, DROPS_KEY])
    except redis.exceptions.TimeoutError as exc:
        return _failed(f"no answer within {_seconds()}", exc, started), {}
    except redis.exceptions.ConnectionError as exc:
        return _failed("unreachable", exc, started), {}
    except Exception as exc:  # any other failure is a failed check, not a 500
        return _failed(f"failed ({type(exc).__name__})", exc, started), {}
    if PROBE_KEY not in found:
        return Check(ok=False, ms=_ms(started), error="a value written was not read back"), {}
    return Check(ok=True, ms=_ms(started)), found


def check_static() -> Check:
    """The manifest of the static files, as this process's pages read it: without it (served by
    something other than `python -m rollback_site.serve`, which collects them, and no
    collectstatic) every page answers 500 while the database and the cache are fine."""
    storage = storages["staticfiles"]
    if isinstance(storage, ManifestFilesMixin) and not storage.hashed_files:
        return Check(ok=False, error="not collected (manage.py collectstatic)")
    return Check(ok=True)


def check_heartbeat(beat: object, *, max_age: float, now: float) -> Check:
    """A heartbeat (as `heartbeat_record` stores it) younger than `max_age` seconds."""
    at = beat.get("at") if isinstance(beat, dict) else None
    if not isinstance(at, int | float):
        return Check(ok=False, error="no heartbeat")
    age = round(max(0.0, now - at), 1)  # a clock slightly ahead is no error
    if age > max_age:
        return Check(ok=False, age_seconds=age, error=f"no heartbeat for {age:.0f} s")
    return Check(ok=True, age_seconds=age)


def heartbeat_record(key: str, *, hostname: str, at: float | None = None) -> None:
    """Say that a worker (WORKER_KEY) or beat (BEAT_KEY) is alive, now or `at` (a Unix time).
    The hostname is for whoever reads Redis; /healthz does not show it."""
    moment = time.time() if at is None else at
    caches[CACHE_ALIAS].set(key, {"at": moment, "hostname": hostname}, timeout=HEARTBEAT_TTL)


# --- Helpers ------------------------------------------------------------------------------------

# The parts failing at this process's last report: a failure is logged (with its cause) when it
# starts and when it ends, not at every poll.
_failing: set[str] = set()


def _log_changes(checks: dict[str, Check]) -> None:
    for part, check in checks.items():
        if check.ok and part in _failing:
            _failing.discard(part)
            log.warning("health: the %s check passes again", part)
        elif not check.ok and part not in _failing:
            _failing.add(part)
            log.warning("health: the %s check fails: %s", part, check.error, exc_info=check.cause)


def _failed(error: str, cause: Exception, started: float) -> Check:
    return Check(ok=False, ms=_ms(started), error=error, cause=cause)


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)


def _seconds() -> str:
    return f"{settings.HEALTH_CHECK_TIMEOUT:g} s"
