"""The heartbeats of every turn a process runs, kept together (agents.turn.claim): each turn's
beat and its look for Stop as before (a cancelled turn is cancelled and lost, one taken over is
lost, the others go on), for several turns at once in one statement per look, not one each."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from django.db import connections
from django.db.backends.signals import connection_created

from agents.turn.claim import Heartbeat
from sessions_app.models import Turn
from sessions_app.services import session_create
from sessions_app.turns import turn_cancel
from tests.sockets import claimed_turn
from tests.waits import until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def heartbeat_statements() -> Iterator[list[str]]:
    """The statements run on the heartbeats' thread (`rollback-heartbeats`)."""
    seen: list[str] = []

    def count(execute, sql, params, many, context):
        if threading.current_thread().name == "rollback-heartbeats":
            seen.append(sql)
        return execute(sql, params, many, context)

    def counted(sender: object, connection: object, **kwargs: object) -> None:
        wrappers = connection.execute_wrappers  # type: ignore[attr-defined]
        if count not in wrappers:  # a pooled connection is "created" each time it is lent
            wrappers.append(count)

    connection_created.connect(counted)
    try:
        yield seen
    finally:
        connection_created.disconnect(counted)


@pytest.fixture
def quick(settings):
    settings.TURN_STOP_POLL_SECONDS = 0.05
    settings.TURN_HEARTBEAT_SECONDS = 0.2


def _turns(alice, n: int) -> list[Turn]:
    return [claimed_turn(session_create(owner=alice, name=f"s{i}")) for i in range(n)]


def test_five_turns_beat_and_look_for_stop_together(alice, quick, heartbeat_statements):
    turns = _turns(alice, 5)
    connections.close_all()  # the heartbeats' thread opens its own, counted from the start
    beats = [Heartbeat(turn) for turn in turns]
    for beat in beats:
        beat.__enter__()
    try:
        time.sleep(1.0)
        assert not any(beat.lost for beat in beats)
        beaten = Turn.objects.filter(pk__in=[t.pk for t in turns], heartbeat_at__isnull=False)
        assert beaten.count() == 5
    finally:
        for beat in beats:
            beat.__exit__(None, None, None)
    looks = [sql for sql in heartbeat_statements if "UPDATE" not in sql]
    updates = [sql for sql in heartbeat_statements if "UPDATE" in sql]
    # About 1.0 / 0.05 looks and 1.0 / 0.2 beats, each for the five turns at once (one per
    # turn would be five times as many).
    assert 5 <= len(looks) <= 25, looks
    assert 2 <= len(updates) <= 6, updates


def test_the_cancelled_turn_is_cancelled_the_one_taken_over_lost_the_others_go_on(alice, quick):
    running, stopped, taken = _turns(alice, 3)
    beats = {turn.pk: Heartbeat(turn) for turn in (running, stopped, taken)}
    for beat in beats.values():
        beat.__enter__()
    try:
        turn_cancel(turn=stopped)
        Turn.objects.filter(pk=taken.pk).update(attempts=2)  # another worker's attempt now
        until(
            lambda: beats[stopped.pk].cancelled and beats[taken.pk].lost,
            "the stopped turn cancelled and the taken one lost",
        )
        time.sleep(0.3)
        assert (beats[stopped.pk].cancelled, beats[stopped.pk].lost) == (True, True)
        assert (beats[taken.pk].cancelled, beats[taken.pk].lost) == (False, True)
        assert (beats[running.pk].cancelled, beats[running.pk].lost) == (False, False)
    finally:
        for beat in beats.values():
            beat.__exit__(None, None, None)


def test_a_turn_whose_run_ended_is_left_as_it_ended(alice, quick):
    first, second = _turns(alice, 2)
    ended = Heartbeat(first)
    going = Heartbeat(second)
    ended.__enter__()
    going.__enter__()
    ended.__exit__(None, None, None)
    turn_cancel(turn=first)  # after its run: nothing of it is this worker's business now
    time.sleep(0.5)
    going.__exit__(None, None, None)
    assert (ended.cancelled, ended.lost) == (False, False)
