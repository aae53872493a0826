"""A reply's thumbs up / down and its note on the chat page (issue 39, item 17): two buttons on
each assistant reply with their pressed state, the note's field opened by a thumbs down, the
answer swapping the feedback control alone, a second click taking the rating back, and the
refusals (another user's message, a message that is not a reply, bad input) storing nothing."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from sessions_app.models import Message
from sharing.services import share_create
from tests.conftest import say

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
NOTE_MAX_CHARS = 2_000  # sessions_app.feedback's


def rated(message: Message, rating: str, note: str) -> None:
    """A reply its owner rated, stored as the feedback service stores it."""
    Message.objects.filter(pk=message.pk).update(
        metadata={**message.metadata, "feedback": {"rating": rating, "note": note}}
    )


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def reply(branch):
    say(branch, "question", "an answer worth reading")
    return Message.objects.get(branch=branch, role="assistant")


def rate(client, session, message, **data):
    url = reverse("chat:feedback", args=[session.pk, message.pk])
    return client.post(url, data, **HX)


def pressed(html: str, which: str) -> str:
    found = re.search(rf'data-testid="feedback-{which}" aria-pressed="(\w+)"', html)
    assert found, html
    return found.group(1)


def stored(message: Message):
    message.refresh_from_db()
    return message.metadata.get("feedback")


def test_each_reply_has_two_unpressed_rating_buttons_and_a_question_has_none(
    as_alice, session, reply
):
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert page.count('data-testid="feedback"') == 1  # the reply's, not the question's
    assert pressed(page, "up") == "false"
    assert pressed(page, "down") == "false"
    assert f'id="feedback-{reply.pk}"' in page


def test_a_thumbs_up_is_stored_and_answered_with_the_control_alone(as_alice, session, reply):
    response = rate(as_alice, session, reply, rating="up")
    assert response.status_code == 200
    html = response.content.decode()
    assert pressed(html, "up") == "true"
    assert pressed(html, "down") == "false"
    assert "an answer worth reading" not in html  # the message's text is never swapped
    assert html.lstrip().startswith(f'<form class="feedback" id="feedback-{reply.pk}"')
    assert stored(reply) == {"rating": "up", "note": ""}
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert pressed(page, "up") == "true"


def test_a_thumbs_down_opens_the_note_and_the_note_is_kept(as_alice, session, reply):
    html = rate(as_alice, session, reply, rating="down").content.decode()
    assert pressed(html, "down") == "true"
    assert re.search(r'data-testid="feedback-note" open', html)
    html = rate(as_alice, session, reply, rating="down", note="  It missed the point. ").content
    assert stored(reply) == {"rating": "down", "note": "It missed the point."}
    assert "It missed the point." in html.decode()
    assert pressed(html.decode(), "down") == "true"


def test_clicking_the_pressed_rating_again_takes_it_back(as_alice, session, reply):
    html = rate(as_alice, session, reply, rating="up").content.decode()
    # The pressed button now sends "clear".
    assert re.search(r'value="clear" class="feedback-up"', html)
    html = rate(as_alice, session, reply, rating="clear").content.decode()
    assert pressed(html, "up") == "false"
    assert stored(reply) is None


def test_another_users_reply_is_a_404_and_keeps_its_rating(client, bob, session, reply):
    rated(reply, "up", "mine")
    client.force_login(bob)
    for data in ({"rating": "down"}, {"rating": "clear"}):
        assert rate(client, session, reply, **data).status_code == 404
    assert stored(reply) == {"rating": "up", "note": "mine"}


def test_a_question_cannot_be_rated(as_alice, session, branch, reply):
    question = Message.objects.get(branch=branch, role="user")
    response = rate(as_alice, session, question, rating="up")
    assert response.status_code == 400
    assert "Only the assistant&#x27;s replies can be rated" in response.content.decode()
    assert stored(question) is None


@pytest.mark.parametrize(
    "data",
    [
        {"rating": "meh"},
        {"rating": ""},
        {},
        {"rating": "down", "note": "x" * (NOTE_MAX_CHARS + 1)},
        {"rating": "up", "note": "nul\x00"},
    ],
)
def test_bad_input_is_a_400_and_stores_nothing(as_alice, session, reply, data):
    rated(reply, "up", "before")
    response = rate(as_alice, session, reply, **data)
    assert response.status_code == 400
    assert stored(reply) == {"rating": "up", "note": "before"}


def test_a_shared_page_shows_no_rating_buttons(client, alice, session, branch, reply):
    rated(reply, "down", "private")
    _share, token = share_create(owner=alice, branch=branch)
    page = client.get(reverse("shared", args=[token])).content.decode()
    assert "an answer worth reading" in page
    assert 'data-testid="feedback"' not in page
    assert "private" not in page
