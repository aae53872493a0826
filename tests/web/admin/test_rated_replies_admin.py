"""The admin's list of rated replies (web.admin.messages.RatedMessageAdmin): only the replies
their owners rated, each with its rating, note, model, user and session, filtered by rating and
by the model that wrote the reply; hidden from staff without the conversations' permission."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions_app.models import Branch, Message
from sessions_app.services import message_append, message_feedback_set, session_create

pytestmark = pytest.mark.django_db
URL = reverse("admin:sessions_app_ratedmessage_changelist")


@pytest.fixture
def admin_client_(client, admin_user):
    client.force_login(admin_user)
    return client


def reply(owner, text: str, model: str) -> Message:
    branch = Branch.objects.get(session=session_create(owner=owner, name=f"{text} session"))
    message_append(branch=branch, role="user", content=f"asked for {text}")
    return message_append(branch=branch, role="assistant", content=text, metadata={"model": model})


@pytest.fixture
def replies(alice, bob):
    good = reply(alice, "good reply", "gpt-4o")
    bad = reply(bob, "bad reply", "small-model")
    reply(alice, "unrated reply", "gpt-4o")
    message_feedback_set(message=good, rating="up", note="Clear and right.")
    message_feedback_set(message=bad, rating="down", note="Made up a function.")
    return good, bad


def listed(response) -> list[str]:
    assert response.status_code == 200
    return sorted(m.content for m in response.context["cl"].result_list)


def test_the_list_shows_only_rated_replies_with_their_details(admin_client_, replies):
    response = admin_client_.get(URL)
    assert listed(response) == ["bad reply", "good reply"]
    html = response.content.decode()
    for shown in ("Clear and right.", "Made up a function.", "gpt-4o", "small-model"):
        assert shown in html
    assert "alice" in html
    assert "bob" in html
    assert "good reply session" in html  # the session, linked
    assert "unrated reply" not in html


def test_the_list_filters_by_rating_and_by_model(admin_client_, replies):
    assert listed(admin_client_.get(URL, {"rating": "up"})) == ["good reply"]
    assert listed(admin_client_.get(URL, {"rating": "down"})) == ["bad reply"]
    assert listed(admin_client_.get(URL, {"model": "small-model"})) == ["bad reply"]
    assert listed(admin_client_.get(URL, {"model": "gpt-4o", "rating": "down"})) == []
    html = admin_client_.get(URL).content.decode()
    assert "?model=gpt-4o" in html  # the filter's choices
    assert "?model=small-model" in html


def test_a_rated_reply_opens_read_only(admin_client_, replies):
    good, _bad = replies
    change = reverse("admin:sessions_app_ratedmessage_change", args=[good.pk])
    response = admin_client_.get(change)
    assert response.status_code == 200
    assert "Clear and right." in response.content.decode()
    assert admin_client_.post(change, {}).status_code == 403


def test_staff_without_the_conversations_permission_see_no_rated_reply(client, replies):
    from django.contrib.auth import get_user_model

    clerk = get_user_model().objects.create_user("clerk", password="clerk-password-1")  # noqa: S106 - a test user's password
    clerk.is_staff = True
    clerk.save()
    client.force_login(clerk)
    assert client.get(URL).status_code == 403
