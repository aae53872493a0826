"""The turn lifecycle, without a model: one turn at a time; a turn whose worker died goes back to
the queue for another worker (its attempt number fencing off the old one), or fails once its
attempts are used up; a turn no worker picked up is failed. A session is never blocked for good."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.errors import TurnInProgress
from sessions_app.models import Message, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.turns import (
    NewMessage,
    TurnTakenOver,
    turn_claim,
    turn_fail,
    turn_finish,
    turn_heartbeat,
    turn_recover_stale,
    turn_start,
    turn_store_messages,
)
from sessions_app.validation import storable_json, storable_text

pytestmark = pytest.mark.django_db


def _age(turn: Turn, seconds: int, field: str) -> None:
    Turn.objects.filter(pk=turn.pk).update(**{field: timezone.now() - timedelta(seconds=seconds)})


def _dead(turn: Turn, settings) -> None:
    """The worker running `turn` stopped beating longer ago than the stale limit."""
    _age(turn, settings.AGENT_TURN_STALE_SECONDS + 1, "heartbeat_at")


def test_a_running_turn_with_a_live_heartbeat_blocks_a_second_turn(session):
    turn = turn_start(session=session, message="first")
    claimed = turn_claim(turn_id=turn.pk)
    assert claimed is not None and claimed.attempts == 1 and claimed.status == "running"
    with pytest.raises(TurnInProgress):
        turn_start(session=session, message="second")


def test_a_turn_is_claimed_once(session):
    turn = turn_start(session=session, message="only once")
    assert turn_claim(turn_id=turn.pk) is not None
    assert turn_claim(turn_id=turn.pk) is None  # a redelivered task


def test_a_turn_whose_worker_died_is_queued_again_for_another_worker(session, settings):
    settings.AGENT_TURN_ATTEMPTS = 2
    turn = turn_start(session=session, message="lost in a crash")
    first = turn_claim(turn_id=turn.pk)
    _dead(turn, settings)

    done = turn_recover_stale()

    assert [t.pk for t in done.requeued] == [turn.pk] and done.failed == []
    turn.refresh_from_db()
    assert turn.status == "queued" and turn.metadata["taken_over"] == 1
    second = turn_claim(turn_id=turn.pk)
    assert second is not None and second.attempts == 2
    # The first worker wakes up late: its attempt is fenced off everywhere.
    assert not turn_heartbeat(turn=first)
    with pytest.raises(TurnTakenOver):
        turn_store_messages(turn=first, messages=[NewMessage(role="assistant", content="late")])
    assert not turn_finish(turn=first, reply="late", tools_used=[])
    assert not turn_fail(turn=first, error="late failure")
    # The second worker stores the one reply.
    turn_store_messages(turn=second, messages=[NewMessage(role="assistant", content="answer")])
    assert turn_finish(turn=second, reply="answer", tools_used=[])
    contents = [m.content for m in branch_history(current_branch(session))]
    assert contents == ["lost in a crash", "answer"]


def test_a_turn_out_of_attempts_fails_readably_and_the_session_goes_on(session, settings):
    settings.AGENT_TURN_ATTEMPTS = 2
    turn = turn_start(session=session, message="unlucky")
    for _ in range(2):
        turn_claim(turn_id=turn.pk)
        _dead(turn, settings)
        turn_recover_stale(session_id=session.pk)
    turn.refresh_from_db()
    assert turn.status == "failed" and turn.attempts == 2
    assert "stopped (2 times" in turn.error and "kept" in turn.error
    second = turn_start(session=session, message="hello again")
    assert second.status == "queued"
    contents = [m.content for m in branch_history(current_branch(session))]
    assert contents == ["unlucky", "hello again"]


def test_a_turn_no_worker_picked_up_is_failed(session, settings):
    settings.TURN_QUEUE_TIMEOUT = 600
    waiting = turn_start(session=session, message="anyone?")
    _age(waiting, 601, "created_at")
    done = turn_recover_stale()
    assert [t.pk for t in done.failed] == [waiting.pk]
    waiting.refresh_from_db()
    assert waiting.status == "failed" and "Celery worker" in waiting.error


def test_a_requeued_turn_waits_its_own_queue_time_not_its_age(session, settings):
    settings.TURN_QUEUE_TIMEOUT = 600
    turn = turn_start(session=session, message="old but just requeued")
    turn_claim(turn_id=turn.pk)
    _dead(turn, settings)
    _age(turn, 3600, "created_at")
    turn_recover_stale()
    assert turn_recover_stale().failed == []
    turn.refresh_from_db()
    assert turn.status == "queued"


def test_recent_turns_are_left_alone(session):
    turn = turn_start(session=session, message="fresh")
    claimed = turn_claim(turn_id=turn.pk)
    assert turn_heartbeat(turn=claimed)
    done = turn_recover_stale()
    assert done.requeued == [] and done.failed == []
    turn.refresh_from_db()
    assert turn.status == "running"


def test_text_the_database_cannot_store_is_cleaned_everywhere(session):
    turn = turn_claim(turn_id=turn_start(session=session, message="tools\x00 please").pk)
    bad = "a\x00b\ud800c"
    turn_store_messages(
        turn=turn,
        messages=[
            NewMessage(
                role="assistant",
                content=bad,
                tool_calls=[{"id": "c1", "function": {"name": "calc", "arguments": bad}}],
            ),
            NewMessage(
                role="tool",
                tool_name="calc",
                tool_call_id="c1",
                tool_args={bad: [bad, {"k": bad}]},
                tool_result=bad,
                metadata={"note": bad},
            ),
        ],
    )
    assert turn_finish(turn=turn, reply=bad, tools_used=["calc"], metadata={"x": bad})
    stored = list(Message.objects.order_by("position"))
    assert stored[0].content == "tools please"
    assert stored[1].content == "ab\ufffdc"
    assert stored[1].tool_calls[0]["function"]["arguments"] == "ab\ufffdc"
    assert stored[2].tool_args == {"ab\ufffdc": ["ab\ufffdc", {"k": "ab\ufffdc"}]}
    assert stored[2].tool_result == "ab\ufffdc" and stored[2].metadata == {"note": "ab\ufffdc"}
    turn.refresh_from_db()
    assert turn.reply == "ab\ufffdc" and turn.metadata["x"] == "ab\ufffdc"


def test_storable_values_are_returned_unchanged():
    value = {"a": ["b", 1, 2.5, None, True, {"c": "d"}]}
    assert storable_json(value) == value
    assert storable_text("plain é 字 🙂") == "plain é 字 🙂"
