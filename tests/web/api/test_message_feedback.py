"""POST /api/v1/messages/{id}/feedback/ (api-contract.md): an assistant message of yours rated
up or down with an optional note, answered with the message, whose `feedback` every message
read shows (null for other roles and unrated replies). Another user's message is a 404; a
message that is not a reply and bad input are 400s, and nothing is stored."""

from __future__ import annotations

import pytest

from sessions_app.models import Message
from tests.conftest import say

pytestmark = pytest.mark.django_db
NOTE_MAX_CHARS = 2_000  # sessions_app.feedback's


@pytest.fixture
def reply(branch):
    say(branch, "question", "answer")
    return Message.objects.get(branch=branch, role="assistant")


def url(message) -> str:
    return f"/api/v1/messages/{message.pk}/feedback/"


def stored(message):
    message.refresh_from_db()
    return message.metadata.get("feedback")


def test_a_reply_is_rated_and_answered_with_the_message(api, reply):
    response = api.post(url(reply), {"rating": "down", "note": "Too vague."}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["id"] == reply.pk
    assert body["role"] == "assistant"
    assert body["feedback"] == {"rating": "down", "note": "Too vague."}
    assert stored(reply) == {"rating": "down", "note": "Too vague."}
    # A new rating replaces the old one whole.
    body = api.post(url(reply), {"rating": "up"}, format="json").json()
    assert body["feedback"] == {"rating": "up", "note": ""}


def test_the_history_shows_each_messages_feedback(api, session, reply):
    history = api.get(f"/api/v1/sessions/{session.pk}/messages/").json()["results"]
    assert [m["feedback"] for m in history] == [None, None]
    api.post(url(reply), {"rating": "up", "note": "Spot on."}, format="json")
    history = api.get(f"/api/v1/sessions/{session.pk}/messages/").json()["results"]
    assert [m["feedback"] for m in history] == [None, {"rating": "up", "note": "Spot on."}]


def test_another_users_message_is_a_404(bob_api, reply):
    for body in ({"rating": "up"}, {"rating": "meh"}):
        response = bob_api.post(url(reply), body, format="json")
        assert response.status_code == 404
        assert response.json() == {"detail": "Message not found."}
    assert stored(reply) is None
    assert bob_api.post("/api/v1/messages/999999/feedback/", {"rating": "up"}).status_code == 404


def test_a_user_message_is_a_400(api, branch, reply):
    question = Message.objects.get(branch=branch, role="user")
    response = api.post(url(question), {"rating": "up"}, format="json")
    assert response.status_code == 400
    assert "Only the assistant's replies can be rated" in response.json()["detail"]
    assert stored(question) is None


@pytest.mark.parametrize(
    "body",
    [
        {"rating": "meh"},
        {"rating": None},
        {"rating": 1},
        {},
        {"note": "no rating"},
        {"rating": "up", "note": "x" * (NOTE_MAX_CHARS + 1)},
        {"rating": "up", "note": 5},
        {"rating": "up", "stars": 5},
    ],
)
def test_bad_input_is_a_400_and_stores_nothing(api, reply, body):
    api.post(url(reply), {"rating": "down", "note": "before"}, format="json")
    response = api.post(url(reply), body, format="json")
    assert response.status_code == 400, response.json()
    assert isinstance(response.json()["detail"], str)
    assert stored(reply) == {"rating": "down", "note": "before"}


def test_a_note_at_the_limit_is_kept(api, reply):
    note = "n" * NOTE_MAX_CHARS
    response = api.post(url(reply), {"rating": "down", "note": note}, format="json")
    assert response.status_code == 200
    assert stored(reply) == {"rating": "down", "note": note}
