"""The turn lifecycle, without a model: one turn at a time; a turn whose worker died goes back to
the queue for another worker (its attempt number fencing off the old one), or fails once its
attempts are used up; a turn no worker picked up is failed. A session is never blocked for good."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from agents.services import turn_submit
from core.validation import storable_json, storable_text
from sessions_app.errors import TurnAlreadyEnded, TurnInProgress
from sessions_app.models import Message, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.turns import (
    CUT_NOTE,
    NewMessage,
    TurnTakenOver,
    turn_cancel,
    turn_claim,
    turn_fail,
    turn_finish,
    turn_heartbeat,
    turn_keep_stopped,
    turn_recover_stale,
    turn_start,
    turn_store_messages,
)

pytestmark = pytest.mark.django_db


def _age(turn: Turn, seconds: int, field: str) -> None:
    Turn.objects.filter(pk=turn.pk).update(**{field: timezone.now() - timedelta(seconds=seconds)})


def _dead(turn: Turn, settings) -> None:
    """The worker running `turn` stopped beating longer ago than the stale limit."""
    _age(turn, settings.AGENT_TURN_STALE_SECONDS + 1, "heartbeat_at")


def test_a_running_turn_with_a_live_heartbeat_blocks_a_second_turn(session):
    turn = turn_start(session=session, message="first")
    claimed = turn_claim(turn_id=turn.pk)
    assert claimed is not None
    assert claimed.attempts == 1
    assert claimed.status == "running"
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

    assert [t.pk for t in done.requeued] == [turn.pk]
    assert done.failed == []
    turn.refresh_from_db()
    assert turn.status == "queued"
    assert turn.metadata["taken_over"] == 1
    second = turn_claim(turn_id=turn.pk)
    assert second is not None
    assert second.attempts == 2
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
    assert turn.status == "failed"
    assert turn.attempts == 2
    assert "stopped (2 times" in turn.error
    assert "kept" in turn.error
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
    assert waiting.status == "failed"
    assert "Celery worker" in waiting.error


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


def test_a_queued_turn_no_worker_claimed_is_sent_again_once_per_interval(session, settings):
    settings.TURN_REDISPATCH_SECONDS = 30
    turn = turn_start(session=session, message="lost on the way")
    assert turn_recover_stale().redispatched == []  # just sent: its task is on its way
    _age(turn, 31, "dispatched_at")
    assert [t.pk for t in turn_recover_stale().redispatched] == [turn.pk]
    assert turn_recover_stale().redispatched == []  # sent again just now
    turn.refresh_from_db()
    assert turn.status == "queued"
    assert turn.attempts == 0


def test_a_claimed_or_requeued_turn_is_not_sent_again_by_the_unclaimed_rule(session, settings):
    settings.TURN_REDISPATCH_SECONDS = 30
    turn = turn_start(session=session, message="taken")
    _age(turn, 31, "dispatched_at")
    turn_claim(turn_id=turn.pk)
    assert turn_recover_stale().redispatched == []
    _dead(turn, settings)
    done = turn_recover_stale()
    assert [t.pk for t in done.requeued] == [turn.pk]
    assert done.redispatched == []
    assert turn_recover_stale().redispatched == []  # the requeue counts as sending it


def test_a_turn_unclaimed_past_the_queue_timeout_is_failed_not_sent_again(session, settings):
    settings.TURN_QUEUE_TIMEOUT = 600
    turn = turn_start(session=session, message="nobody home")
    _age(turn, 601, "created_at")
    _age(turn, 601, "dispatched_at")
    done = turn_recover_stale()
    assert [t.pk for t in done.failed] == [turn.pk]
    assert done.redispatched == []


def test_recent_turns_are_left_alone(session):
    turn = turn_start(session=session, message="fresh")
    claimed = turn_claim(turn_id=turn.pk)
    assert turn_heartbeat(turn=claimed)
    done = turn_recover_stale()
    assert done.requeued == []
    assert done.failed == []
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
    assert stored[2].tool_result == "ab\ufffdc"
    assert stored[2].metadata == {"note": "ab\ufffdc"}
    turn.refresh_from_db()
    assert turn.reply == "ab\ufffdc"
    assert turn.metadata["x"] == "ab\ufffdc"


def test_what_the_agent_stores_is_bounded_and_marked_where_it_was_cut(session, settings):
    settings.AGENT_MAX_REPLY_CHARS = 100
    turn = turn_claim(turn_id=turn_start(session=session, message="go").pk)
    long = "y" * 1000
    turn_store_messages(
        turn=turn,
        messages=[
            NewMessage(
                role="assistant",
                content=long,
                tool_calls=[{"id": "c1", "function": {"name": "calc", "arguments": long}}],
            ),
            NewMessage(
                role="tool",
                content=long,
                tool_name="calc",
                tool_call_id="c1",
                tool_args={"expression": long},
                tool_result=long,
            ),
            NewMessage(role="assistant", content="short"),
        ],
    )
    assert turn_finish(turn=turn, reply=long, tools_used=["calc"])
    call, result, reply = list(Message.objects.filter(role__in=["assistant", "tool"]))
    cut = "y" * 100 + CUT_NOTE
    assert call.content == cut
    assert call.tool_calls[0]["function"]["arguments"] == cut
    assert call.tool_calls[0]["id"] == "c1"  # still paired with its result
    assert result.content == cut
    assert result.tool_result == cut
    assert result.tool_args == {"cut_off": json.dumps({"expression": long})[:100] + CUT_NOTE}
    assert reply.content == "short"
    turn.refresh_from_db()
    assert turn.reply == cut


def test_a_text_already_cut_off_is_stored_as_it_is(session, settings):
    settings.AGENT_MAX_REPLY_CHARS = 100
    turn = turn_claim(turn_id=turn_start(session=session, message="go").pk)
    cut = "z" * 100 + CUT_NOTE
    turn_store_messages(turn=turn, messages=[NewMessage(role="assistant", content=cut)])
    assert Message.objects.get(role="assistant").content == cut


def test_storable_values_are_returned_unchanged():
    value = {"a": ["b", 1, 2.5, None, True, {"c": "d"}]}
    assert storable_json(value) == value
    assert storable_text("plain é 字 🙂") == "plain é 字 🙂"


# --- cancel against the turn's natural end ---------------------------------------------------


def test_a_cancel_before_the_answer_is_stored_wins_and_only_the_stopped_reply_is_kept(session):
    turn = turn_claim(turn_id=turn_start(session=session, message="hi").pk)
    assert turn is not None
    turn_cancel(turn=Turn.objects.get(pk=turn.pk))
    # The worker, unaware, tries to store its whole answer and finish: refused.
    with pytest.raises(TurnTakenOver):
        turn_store_messages(turn=turn, messages=[NewMessage(role="assistant", content="Hello.")])
    assert not turn_finish(turn=turn, reply="Hello.", tools_used=[])
    assert turn_keep_stopped(turn=turn, reply="Hel")
    turn.refresh_from_db()
    assert turn.status == "cancelled"
    assert turn.reply == "Hel"
    stored = branch_history(current_branch(session))
    assert [(m.role, m.content) for m in stored] == [("user", "hi"), ("assistant", "Hel")]
    assert stored[-1].metadata["stopped"] is True
    # Kept once only.
    assert not turn_keep_stopped(turn=turn, reply="Hel")
    assert current_branch(session).message_count == 2


def test_a_cancel_after_the_turn_finished_is_refused_and_changes_nothing(session):
    turn = turn_claim(turn_id=turn_start(session=session, message="hi").pk)
    assert turn is not None
    turn_store_messages(turn=turn, messages=[NewMessage(role="assistant", content="Hello.")])
    assert turn_finish(turn=turn, reply="Hello.", tools_used=[], metadata={"finish_reason": "stop"})
    with pytest.raises(TurnAlreadyEnded):
        turn_cancel(turn=Turn.objects.get(pk=turn.pk))
    assert not turn_keep_stopped(turn=turn, reply="Hel")
    turn.refresh_from_db()
    assert turn.status == "done"
    assert turn.finish_reason == "stop"
    stored = branch_history(current_branch(session))
    assert [(m.role, m.content) for m in stored] == [("user", "hi"), ("assistant", "Hello.")]
    assert "stopped" not in stored[-1].metadata


def test_a_failed_turn_cannot_be_cancelled(session):
    turn = turn_start(session=session, message="hi")
    turn_fail(turn=turn, error="no")
    with pytest.raises(TurnAlreadyEnded):
        turn_cancel(turn=turn)
    assert Turn.objects.get(pk=turn.pk).status == "failed"


def test_a_cancelled_queued_turn_is_never_claimed(session):
    turn = turn_start(session=session, message="hi")
    turn_cancel(turn=turn)
    assert turn_claim(turn_id=turn.pk) is None
    assert Turn.objects.get(pk=turn.pk).status == "cancelled"


# A submission looks for stale turns of its session only when one in progress refuses it
# (agents.services.turn_submit): the session is never blocked by a turn nobody runs.


def test_a_submission_behind_a_turn_no_worker_picked_up_fails_it_and_starts(session, settings):
    settings.TURN_QUEUE_TIMEOUT = 600
    waiting = turn_start(session=session, message="anyone?")
    _age(waiting, 601, "created_at")

    second = turn_submit(session=session, message="hello?")

    waiting.refresh_from_db()
    assert waiting.status == "failed"
    assert second.status == "queued"
    assert [m.content for m in branch_history(current_branch(session))] == ["anyone?", "hello?"]


def test_a_submission_behind_a_dead_turn_out_of_attempts_fails_it_and_starts(session, settings):
    settings.AGENT_TURN_ATTEMPTS = 1
    dead = turn_start(session=session, message="lost")
    turn_claim(turn_id=dead.pk)
    _dead(dead, settings)

    second = turn_submit(session=session, message="again")

    dead.refresh_from_db()
    assert dead.status == "failed"
    assert second.status == "queued"


def test_a_submission_behind_a_dead_turn_with_attempts_left_requeues_it_and_is_refused(
    session, settings
):
    settings.AGENT_TURN_ATTEMPTS = 2
    dead = turn_start(session=session, message="lost")
    turn_claim(turn_id=dead.pk)
    _dead(dead, settings)

    with pytest.raises(TurnInProgress):
        turn_submit(session=session, message="again")

    dead.refresh_from_db()
    assert dead.status == "queued"  # its next attempt is on its way
    assert Message.objects.filter(content="again").count() == 0


def test_a_submission_behind_a_live_turn_is_refused(session):
    live = turn_start(session=session, message="working")
    turn_claim(turn_id=live.pk)

    with pytest.raises(TurnInProgress):
        turn_submit(session=session, message="me too")

    live.refresh_from_db()
    assert live.status == "running"


def test_a_first_claim_names_its_worker_and_a_second_claim_gets_nothing(session):
    queued = turn_start(session=session, message="hi")

    claimed = turn_claim(turn_id=queued.pk, worker="host:1")
    again = turn_claim(turn_id=queued.pk, worker="host:2")

    assert claimed is not None
    assert (claimed.status, claimed.attempts, claimed.metadata["worker"]) == (
        "running",
        1,
        "host:1",
    )
    assert again is None
    row = Turn.objects.get(pk=queued.pk)
    assert (row.status, row.attempts, row.metadata["worker"]) == ("running", 1, "host:1")
    # The claim read what the worker builds its agent from: nothing is read again.
    assert claimed.session.owner.pk == session.owner_id
    assert claimed.branch.pk == claimed.branch_id
    assert claimed.message == "hi"


def test_a_cancelled_queued_turn_is_not_claimed(session):
    queued = turn_start(session=session, message="hi")
    assert turn_cancel(turn=queued)

    assert turn_claim(turn_id=queued.pk, worker="host:1") is None
    assert Turn.objects.get(pk=queued.pk).status == "cancelled"
