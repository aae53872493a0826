"""The turn lifecycle, without a model: one turn at a time, and turns whose worker died or that
no worker picked up are expired so a session is never blocked for good."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.errors import TurnInProgress
from sessions_app.models import Message, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.turns import (
    BranchMoved,
    NewMessage,
    turn_claim,
    turn_expire_stale,
    turn_finish,
    turn_start,
    turn_store_messages,
)

pytestmark = pytest.mark.django_db


def _age(turn: Turn, seconds: int, field: str) -> None:
    Turn.objects.filter(pk=turn.pk).update(**{field: timezone.now() - timedelta(seconds=seconds)})


def test_a_running_turn_with_a_live_heartbeat_blocks_a_second_turn(session):
    turn = turn_start(session=session, message="first")
    assert turn_claim(turn_id=turn.pk)
    with pytest.raises(TurnInProgress):
        turn_start(session=session, message="second")


def test_a_turn_whose_worker_died_is_expired_and_the_session_goes_on(session, settings):
    settings.AGENT_TURN_STALE_SECONDS = 60
    dead = turn_start(session=session, message="lost in a crash")
    turn_claim(turn_id=dead.pk)
    _age(dead, 61, "heartbeat_at")
    second = turn_start(session=session, message="hello again")
    dead.refresh_from_db()
    assert dead.status == "failed" and "stopped" in dead.error and "kept" in dead.error
    assert second.status == "queued"
    contents = [m.content for m in branch_history(current_branch(session))]
    assert contents == ["lost in a crash", "hello again"]


def test_a_turn_no_worker_picked_up_is_expired(session, settings):
    settings.TURN_QUEUE_TIMEOUT = 600
    waiting = turn_start(session=session, message="anyone?")
    _age(waiting, 601, "created_at")
    assert turn_expire_stale() == 1
    waiting.refresh_from_db()
    assert waiting.status == "failed" and "Celery worker" in waiting.error


def test_recent_turns_are_not_expired(session):
    turn = turn_start(session=session, message="fresh")
    turn_claim(turn_id=turn.pk)
    assert turn_expire_stale() == 0
    turn.refresh_from_db()
    assert turn.status == "running"


def test_a_late_answer_to_an_expired_turn_is_not_stored(session, settings):
    settings.AGENT_TURN_STALE_SECONDS = 60
    turn = turn_start(session=session, message="slow one")
    turn_claim(turn_id=turn.pk)
    _age(turn, 61, "heartbeat_at")
    assert turn_expire_stale(session=session) == 1
    with pytest.raises(BranchMoved, match="given up"):
        turn_store_messages(turn=turn, messages=[NewMessage(role="assistant", content="late")])
    finished = turn_finish(turn=turn, reply="late", tools_used=[])
    assert finished.status == "failed"
    assert Message.objects.count() == 1
