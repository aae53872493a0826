"""How a turn's end leaves its reply: a stop keeps the reply shown so far at once, in the same
transaction as the cancel, so every page that hears `turn.cancelled` finds the stopped message in
its final form; the worker that notices later only adds its metadata."""

from __future__ import annotations

import pytest

from core import events
from core.model_choice import DEMO_MODEL_ID
from sessions_app.models import Turn
from sessions_app.reply_stream import ReplyStream
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import message_append
from sessions_app.turns import (
    CUT_NOTE,
    stopped_line,
    turn_cancel,
    turn_claim,
    turn_continue,
    turn_keep_stopped,
    turn_start,
)
from web.chat_state import conversation

pytestmark = pytest.mark.django_db


def _streamed(turn: Turn, *pieces: str) -> None:
    with ReplyStream(session_id=turn.session_id, turn_id=turn.pk, attempt=turn.attempts) as out:
        for piece in pieces:
            out.add(piece)
            out.flush()


@pytest.mark.django_db(transaction=True)  # turn.cancelled is sent once the cancel commits
def test_a_stop_keeps_the_reply_shown_so_far_before_it_is_announced(session, settings):
    settings.OPENAI_API_KEY = settings.OPENAI_BASE_URL = ""
    turn = turn_claim(turn_id=turn_start(session=session, message="tell me").pk)
    assert turn is not None
    _streamed(turn, "Once upon ", "a time")

    # What a page that hears turn.cancelled finds when it fetches the conversation.
    found: list[list[tuple[str, str]]] = []

    def on_event(event: events.Event) -> None:
        if event["type"] == "turn.cancelled":
            found.append([(m.role, m.content) for m in branch_history(current_branch(session))])

    stop = events.listen(session.pk, on_event)
    try:
        turn_cancel(turn=Turn.objects.get(pk=turn.pk))
    finally:
        stop()
    shown = [("user", "tell me"), ("assistant", "Once upon a time")]
    assert found == [shown]
    stored = branch_history(current_branch(session))
    reply = stored[-1]
    assert reply.metadata["stopped"] is True
    assert reply.metadata["finish_reason"] == "cancelled"
    assert reply.metadata["demo"] is True
    assert reply.metadata["model"] == DEMO_MODEL_ID
    assert current_branch(session).message_count == 2
    assert Turn.objects.get(pk=turn.pk).reply == "Once upon a time"

    # The worker notices and keeps what it had (a little more): the text stays as shown, its
    # metadata is added, nothing is stored twice.
    assert turn_keep_stopped(
        turn=turn, reply="Once upon a time there", metadata={"latency_ms": 12, "model": "m"}
    )
    stored = branch_history(current_branch(session))
    assert [(m.role, m.content) for m in stored] == shown
    assert stored[-1].metadata["latency_ms"] == 12
    assert stored[-1].metadata["stopped"] is True
    assert current_branch(session).message_count == 2


def test_a_stop_before_any_text_keeps_an_empty_stopped_reply_and_the_worker_adds_to_it(session):
    """Issue 36: a stopped turn always ends in a reply marked stopped, even an empty one, so the
    page says "Stopped before the reply" with Regenerate, and the next message is never joined
    to the stopped one. The worker's text, which had not reached the pages, fills it in."""
    turn = turn_claim(turn_id=turn_start(session=session, message="hi").pk)
    assert turn is not None
    turn_cancel(turn=Turn.objects.get(pk=turn.pk))
    stored = branch_history(current_branch(session))
    assert [(m.role, m.content) for m in stored] == [("user", "hi"), ("assistant", "")]
    assert stored[-1].metadata["stopped"] is True
    assert stopped_line(stored[-1].metadata) == "Stopped before the reply"
    assert turn_keep_stopped(turn=turn, reply="He", metadata={"latency_ms": 5})
    stored = branch_history(current_branch(session))
    assert [(m.role, m.content) for m in stored] == [("user", "hi"), ("assistant", "He")]
    assert stored[-1].metadata["latency_ms"] == 5
    assert not turn_keep_stopped(turn=turn, reply="Hello")  # once only


def test_a_queued_turn_stopped_keeps_an_empty_stopped_reply(session):
    turn = turn_start(session=session, message="hi")
    turn_cancel(turn=turn)
    assert current_branch(session).message_count == 2
    turn = Turn.objects.get(pk=turn.pk)
    assert turn.reply == ""
    assert turn.reply_message is not None
    assert turn.reply_message.metadata["stopped"] is True


def test_a_stopped_continuation_still_extends_its_reply(session, branch):
    message_append(branch=branch, role="user", content="count")
    cut = message_append(
        branch=branch,
        role="assistant",
        content="1 2" + CUT_NOTE,
        metadata={"finish_reason": "length"},
    )
    turn = turn_claim(turn_id=turn_continue(session=session, reply_id=cut.pk).pk)
    assert turn is not None
    _streamed(turn, " 3 4")
    turn_cancel(turn=Turn.objects.get(pk=turn.pk))
    kept = branch_history(current_branch(session))[-1]
    assert kept.content == " 3 4"
    assert kept.metadata["continues"] == cut.pk
    shown = conversation(session)["history"]
    assert [m.content for m in shown] == ["count", "1 2 3 4"]
    assert shown[-1].metadata["stopped"] is True
