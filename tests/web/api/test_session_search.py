"""GET /api/v1/sessions/ with ?q=, ?order=activity and ?archived=true, and PATCH {"archived"}."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.models import Session
from sessions_app.services import message_append, session_create

pytestmark = pytest.mark.django_db
URL = "/api/v1/sessions/"


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [s["name"] for s in response.json()["results"]]


@pytest.fixture
def two(alice):
    first = session_create(owner=alice, name="First")
    second = session_create(owner=alice, name="Second")
    Session.objects.filter(pk=first.pk).update(
        created_at=timezone.now() - timedelta(hours=2),
        updated_at=timezone.now() - timedelta(hours=2),
    )
    return first, second


def test_q_finds_a_word_that_is_only_in_a_message(api, two):
    first, _ = two
    message_append(branch=first.branches.get(), role="user", content="hello two worlds")
    assert names(api.get(URL, {"q": "hello two"})) == ["First"]
    assert names(api.get(URL, {"q": "seco"})) == ["Second"]  # part of a name


@pytest.mark.parametrize("q", ['"x', 'a" OR "b', "NEAR(", "x" * 200, "* -y", "'; DROP --"])
def test_a_q_of_quotes_or_operators_is_a_list(api, two, q):
    response = api.get(URL, {"q": q})
    assert response.status_code == 200
    assert isinstance(response.json()["results"], list)


def test_q_matches_the_start_of_words_in_messages(api, two):
    first, _ = two
    message_append(branch=first.branches.get(), role="user", content="it was restored")
    assert names(api.get(URL, {"q": "restor"})) == ["First"]
    assert names(api.get(URL, {"q": "was RESTO"})) == ["First"]
    assert names(api.get(URL, {"q": "estored"})) == []


@pytest.mark.parametrize(
    ("q", "reason"),
    [
        ("x" * 201, "the limit is 200"),
        ("x" * 10_000, "the limit is 200"),
        ("\x1b[0m", "control characters"),
        ("a\x00", "NUL"),
        ('" * - ( )', "no letter or digit"),
        ("'; --", "no letter or digit"),
    ],
)
def test_a_q_that_cannot_be_read_is_400_with_the_reason(api, two, q, reason):
    response = api.get(URL, {"q": q})
    assert response.status_code == 400
    assert reason in response.json()["detail"]


def test_order_activity_puts_the_most_recently_active_first(api, two):
    first, _ = two
    assert names(api.get(URL)) == ["Second", "First"]  # newest first
    message_append(branch=first.branches.get(), role="user", content="back again")
    assert names(api.get(URL, {"order": "activity"})) == ["First", "Second"]
    assert names(api.get(URL)) == ["Second", "First"]


def test_an_unknown_order_is_400(api, two):
    response = api.get(URL, {"order": "name"})
    assert response.status_code == 400
    assert "order" in response.json()["detail"]
    response = api.get(URL, {"archived": "maybe"})
    assert response.status_code == 400
    assert "archived" in response.json()["detail"]


def test_archive_and_unarchive_through_the_api(api, two):
    first, _ = two
    response = api.patch(f"{URL}{first.pk}/", {"archived": True}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["archived_at"] is not None
    assert body["archived_at"].endswith("Z")
    assert names(api.get(URL)) == ["Second"]
    assert names(api.get(URL, {"archived": "true"})) == ["First"]
    assert api.get(f"{URL}{first.pk}/").json()["archived_at"] == body["archived_at"]
    response = api.patch(f"{URL}{first.pk}/", {"archived": False}, format="json")
    assert response.json()["archived_at"] is None
    assert names(api.get(URL)) == ["Second", "First"]
    assert names(api.get(URL, {"archived": "true"})) == []


def test_archived_must_be_true_or_false(api, two):
    first, _ = two
    response = api.patch(f"{URL}{first.pk}/", {"archived": "yes"}, format="json")
    assert response.status_code == 400
    assert "archived" in response.json()["detail"]
    first.refresh_from_db()
    assert first.archived_at is None


def test_archiving_another_users_session_is_404(bob_api, two):
    first, _ = two
    response = bob_api.patch(f"{URL}{first.pk}/", {"archived": True}, format="json")
    assert response.status_code == 404
    first.refresh_from_db()
    assert first.archived_at is None
    assert names(bob_api.get(URL, {"archived": "true"})) == []
    assert names(bob_api.get(URL, {"q": "First"})) == []
