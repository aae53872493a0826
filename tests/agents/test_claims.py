"""A worker's claim of a turn that meets a database error (the server restarted, a failover, a
dropped connection) is retried, not lost; a queued turn whose task is gone (a lost message, a
worker that died before claiming it, a broker down when it was sent) is handed to a worker again
by the recovery job within TURN_REDISPATCH_SECONDS, and a task delivered twice runs it once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

import psycopg
import pytest
from celery import current_app
from django.db import connection
from django.utils import timezone

from agents import dispatch
from agents.dispatch import drain, enqueue_turn
from sessions_app.models import Turn
from sessions_app.turns import turn_start
from tests.fakes.chat_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def _raw_connection() -> psycopg.Connection:
    """A connection of its own, outside Django's: it holds the turn's row like another worker."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    return psycopg.connect(**params)


def _backend_waiting_on(holder_pid: int, table: str) -> int | None:
    """A backend of this test's database waiting on a lock of `table`. Of this database only:
    the server's other databases are other xdist workers' (CI run: this test's two variants, on
    two workers, each terminated a claim of the other's, and the embedded one's retry was
    terminated too)."""
    with _raw_connection() as probe, probe.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database() AND pid <> %s AND query ILIKE %s",
            [holder_pid, f"%{table}%"],
        )
        row = cursor.fetchone()
    return row[0] if row else None


@contextmanager
def _celery_worker() -> Iterator[Callable[[int], None]]:
    """A real Celery worker (in a thread of this process) on the Redis broker: it acks, retries
    and sends retries as a deployed one does."""
    from celery.contrib.testing.worker import start_worker

    with start_worker(current_app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        yield lambda turn_id: current_app.tasks["agents.run_turn"].delay(turn_id)


@contextmanager
def _embedded() -> Iterator[Callable[[int], None]]:
    """The embedded mode: no broker, the turn runs on the web process's pool."""
    from rollback_site.celery import app

    keys = ("task_always_eager", "task_eager_propagates")
    before = {key: app.conf[key] for key in keys}
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    try:
        yield enqueue_turn
    finally:
        drain()
        app.conf.update(before)


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.parametrize("runner", [_celery_worker, _embedded], ids=["celery", "embedded"])
def test_a_claim_whose_database_connection_dies_is_retried_and_the_turn_runs(
    fake_llm, session, runner
):
    fake_llm.queue(Reply("answered after all"))
    turn = turn_start(session=session, message="hello")

    with runner() as send, _raw_connection() as holder:
        # Another transaction holds the turn's row, so the worker's claim waits on it...
        holder.execute("SELECT id FROM sessions_app_turn WHERE id = %s FOR UPDATE", [turn.pk])
        send(turn.pk)
        for _ in range(400):
            waiting = _backend_waiting_on(holder.info.backend_pid, "sessions_app_turn")
            if waiting is not None:
                break
            time.sleep(0.05)
        assert waiting is not None, "the claim never waited on the row"
        # ... and its connection dies while it waits, as in a server restart.
        holder.execute("SELECT pg_terminate_backend(%s)", [waiting])
        holder.rollback()
        for _ in range(600):
            turn.refresh_from_db()
            if turn.status not in Turn.ACTIVE:
                break
            time.sleep(0.05)
    assert (turn.status, turn.reply, turn.attempts) == ("done", "answered after all", 1)


def test_a_queued_turn_whose_task_was_never_sent_runs_within_the_recovery_window(
    fake_llm, session, inline_turns, settings
):
    assert settings.TURN_REDISPATCH_SECONDS + settings.TURN_RECOVERY_SECONDS <= 60
    fake_llm.queue(Reply("found and answered"))
    turn = turn_start(session=session, message="is anyone there?")  # its task was never sent
    before = timezone.now() - timedelta(seconds=settings.TURN_REDISPATCH_SECONDS + 1)
    Turn.objects.filter(pk=turn.pk).update(dispatched_at=before)

    current_app.tasks["agents.recover_turns"].apply()  # what beat runs every few seconds
    turn.refresh_from_db()
    assert (turn.status, turn.reply, turn.attempts) == ("done", "found and answered", 1)

    # The first task was only late after all: it arrives now and runs nothing a second time.
    assert current_app.tasks["agents.run_turn"].apply(args=[turn.pk]).get() == "not queued"
    assert len(fake_llm.requests) == 1


def test_the_embedded_pool_runs_as_many_turns_at_once_as_turn_threads(settings):
    settings.TURN_THREADS = 3
    drain()  # a pool made under other settings goes
    running = threading.Barrier(3, timeout=10)  # three at once, or none gets past

    def turn() -> str:
        running.wait()
        return threading.current_thread().name

    try:
        pool = dispatch._executor()
        names = [done.result(timeout=20) for done in [pool.submit(turn) for _ in range(3)]]
    finally:
        drain()
    assert len(set(names)) == 3
    assert all(name.startswith("rollback-turn") for name in names)
