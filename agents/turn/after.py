"""Step 6, after: once the turn has ended, one log line says how (`report_turn`), and a
worker's turn names its session, so the reply never waits for it. (Whether to summarise its
branch ahead of need is judged by the store, from what the turn holds: agents.summaries.)"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sessions_app.models import Turn

from ..titles import session_autotitle
from .phases import recorded

log = logging.getLogger("agents.turn.after")
# One line at the end of every turn (report_turn): its outcome, the model's latency and tokens.
turns_log = logging.getLogger("rollback.turns")


def after(turn: Turn) -> None:
    """The session's title (after its first exchanges). `turn` is the instance the attempt ran
    with: `turn_finish` set what it wrote on it (status, reply), so it is not read again; a
    turn that did not end `done` here wants none."""
    session_autotitle(turn)


def report_turn(turn: Turn) -> None:
    """Log how the worker's attempt at `turn` ended, in one line (logger `rollback.turns`,
    "turn finished"): its status and finish reason, the model, its latency (`latency_ms` for the
    whole run, `first_token_ms` to the reply's first text, `phases_ms` each step's time), the
    tokens it reported and the tools run; a failed turn's error, at WARNING. A turn taken from
    this worker meanwhile (its attempt is no longer the turn's) is reported as `taken_over`, and
    its new worker reports the rest.
    A turn this attempt finished (`turn_finish` set `done` on the instance) is reported from
    what it wrote, without reading the row again."""
    if turn.status == Turn.Status.DONE:
        fields = _fields(
            {"tools_used": turn.tools_used, "metadata": turn.metadata}, Turn.Status.DONE
        )
        fields["attempt"] = turn.attempts
        _timed(fields)
        turns_log.info("turn finished", extra=fields)
        return
    try:
        row = (
            Turn.objects.filter(pk=turn.pk)
            .values("status", "attempts", "error", "tools_used", "metadata")
            .first()
        )
    except Exception:  # the database is away: the turn's own lines said what happened
        log.warning("turn %s: could not read how it ended", turn.pk, exc_info=True)
        return
    if row is None:
        turns_log.info("turn finished", extra={"status": "deleted", "attempt": turn.attempts})
        return
    status = row["status"]
    if row["attempts"] != turn.attempts or status in Turn.ACTIVE:
        status = "taken_over"
    fields = _fields(row, status)
    fields["attempt"] = turn.attempts
    _timed(fields)
    failed = status == Turn.Status.FAILED
    if failed:
        fields["error"] = row["error"]
    turns_log.log(logging.WARNING if failed else logging.INFO, "turn finished", extra=fields)


def _timed(fields: dict[str, object]) -> None:
    """Where the worker's attempt spent its time, step by step (agents.turn.phases)."""
    phases = recorded()
    if phases:
        fields["phases_ms"] = phases


def _fields(row: Mapping[str, object], status: str) -> dict[str, object]:
    """The log line's fields (logging's `extra`) from the turn's row."""
    meta = row["metadata"] if isinstance(row["metadata"], dict) else {}
    usage = meta.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    tools = row["tools_used"] if isinstance(row["tools_used"], list) else []
    return {
        "status": status,
        "finish_reason": meta.get("finish_reason")
        or ("cancelled" if status == Turn.Status.CANCELLED else None),
        "model": meta.get("model"),
        "latency_ms": meta.get("latency_ms"),
        "first_token_ms": meta.get("first_token_ms"),
        "input_tokens": usage.get("input_tokens"),
        "output_tokens": usage.get("output_tokens"),
        "total_tokens": usage.get("total_tokens"),
        "tool_calls": len(tools),
        "tools": tools,
    }
