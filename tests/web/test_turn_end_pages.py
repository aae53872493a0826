"""The chat page's views for a turn's end: Stop answers the conversation in its final form (the
stopped reply stored, the composer free), and Continue refuses what cannot be continued with a
clear message, writing nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions_app.models import Turn
from sessions_app.reply_stream import ReplyStream
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import message_append, session_create
from sessions_app.turns import NewMessage, turn_claim, turn_keep_stopped, turn_start
from tests.conftest import say

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def test_stop_answers_the_conversation_with_the_stopped_reply_in_its_final_form(as_alice, session):
    turn = turn_claim(turn_id=turn_start(session=session, message="tell me").pk)
    assert turn is not None
    with ReplyStream(session_id=session.pk, turn_id=turn.pk, attempt=turn.attempts) as out:
        out.add("Once upon a time")
    response = as_alice.post(reverse("chat:cancel", args=[session.pk, turn.pk]), **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="messages"' in html
    assert 'data-streaming="true"' not in html
    assert 'data-testid="stopped-badge"' in html
    assert "Once upon a time" in html
    assert 'data-testid="regenerate"' in html
    assert 'data-busy="false"' in html
    assert "2 messages" in html  # the header's count
    assert Turn.objects.get(pk=turn.pk).status == "cancelled"


def test_continue_refuses_a_reply_that_is_not_cut_off_and_writes_nothing(as_alice, session, branch):
    say(branch, "question")
    whole = message_append(
        branch=branch, role="assistant", content="all", metadata={"finish_reason": "stop"}
    )
    response = as_alice.post(reverse("chat:continue", args=[session.pk, whole.pk]), **HX)
    assert response.status_code == 400
    assert "cut off" in response.content.decode()
    assert not Turn.objects.filter(session=session).exists()
    assert len(branch_history(current_branch(session))) == 2


def test_continue_of_a_message_of_another_session_is_not_found(as_alice, session, alice):
    other = session_create(owner=alice, name="other")
    say(current_branch(other), "q")
    cut = message_append(
        branch=current_branch(other),
        role="assistant",
        content="cut",
        metadata={"finish_reason": "length"},
    )
    response = as_alice.post(reverse("chat:continue", args=[session.pk, cut.pk]), **HX)
    assert response.status_code == 404
    assert not Turn.objects.exists()


def test_a_stopped_turn_shows_what_ran_and_what_did_not_with_regenerate(as_alice, session):
    """Issue 36: the page shows the stopped turn's tool message and its line ("Stopped: ...
    ran; ... did not") with Regenerate; the API's turn says cancelled, with the tool that ran."""
    turn = turn_claim(turn_id=turn_start(session=session, message="message bob, email him").pk)
    assert turn is not None
    as_alice.post(reverse("chat:cancel", args=[session.pk, turn.pk]), **HX)
    calls = [
        {"id": "a", "type": "function", "function": {"name": "notes__add_note", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "write_file", "arguments": "{}"}},
    ]
    ran = NewMessage(
        role="tool",
        content="added",
        tool_name="notes__add_note",
        tool_result="added",
        tool_call_id="a",
        effect="external",
    )
    assert turn_keep_stopped(
        turn=turn, reply="", messages=[NewMessage(role="assistant", tool_calls=calls), ran]
    )
    html = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert "Stopped: notes__add_note ran; write_file did not" in html
    assert 'data-testid="stopped-line"' in html
    assert 'data-testid="regenerate"' in html
    assert "tool: notes__add_note" in html

    api = as_alice.get(f"/api/v1/turns/{turn.pk}/").json()
    assert api["status"] == "cancelled"
    assert api["finish_reason"] == "cancelled"
    assert api["tools_used"] == ["notes__add_note"]


def test_a_turn_stopped_before_it_ran_says_so_with_regenerate(as_alice, session):
    turn = turn_start(session=session, message="never mind")
    response = as_alice.post(reverse("chat:cancel", args=[session.pk, turn.pk]), **HX)
    html = response.content.decode()
    assert "Stopped before the reply" in html
    assert 'data-testid="regenerate"' in html
