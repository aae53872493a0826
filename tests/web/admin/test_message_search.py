"""The admin's message list: search by text through the full-text index (every word, as the
start of a word), filter by the user who owns the session, refusals of searches it cannot read,
and the permissions of staff users as modelled (issue 25)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from sessions_app.models import Message
from sessions_app.services import session_create
from tests.conftest import say

pytestmark = pytest.mark.django_db
URL = reverse("admin:sessions_app_message_changelist")


@pytest.fixture
def admin_client_(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def texts(alice, bob):
    say(session_create(owner=alice, name="A").branches.get(), "restore the backup", "restored.")
    say(session_create(owner=bob, name="B").branches.get(), "please restore mine", "no")


def contents(response) -> list[str]:
    assert response.status_code == 200
    return sorted(m.content for m in response.context["cl"].result_list)


def test_messages_are_found_by_the_start_of_their_words(admin_client_, texts):
    found = contents(admin_client_.get(URL, {"q": "restor"}))
    assert found == ["please restore mine", "restore the backup", "restored."]
    assert contents(admin_client_.get(URL, {"q": "restore backup"})) == ["restore the backup"]
    assert contents(admin_client_.get(URL, {"q": "estore"})) == []


def test_messages_are_filtered_by_their_owner_with_or_without_a_search(
    admin_client_, texts, alice, bob
):
    assert contents(admin_client_.get(URL, {"owner": bob.pk})) == ["no", "please restore mine"]
    found = contents(admin_client_.get(URL, {"owner": alice.pk, "q": "restor"}))
    assert found == ["restore the backup", "restored."]
    body = admin_client_.get(URL, {"owner": alice.pk}).content.decode()
    assert "alice" in body  # the filter names the user chosen


def test_the_user_list_links_to_each_users_messages(admin_client_, texts, alice):
    body = admin_client_.get(reverse("admin:accounts_user_changelist")).content.decode()
    assert f"{URL}?owner={alice.pk}" in body


@pytest.mark.parametrize("q", ["\x07bell", "?!", "z" * 201])
def test_a_search_the_admin_cannot_read_lists_nothing_and_says_why(admin_client_, texts, q):
    response = admin_client_.get(URL, {"q": q}, follow=True)
    assert contents(response) == []
    shown = [str(m) for m in response.context["messages"]]
    assert len(shown) == 1
    assert any(w in shown[0] for w in ("control characters", "no letter or digit", "limit"))
    assert Message.objects.count() == 4  # nothing written, nothing lost


def test_a_staff_user_without_the_view_permission_cannot_search_messages(
    client, django_user_model, texts
):
    staff = django_user_model.objects.create(username="helper", is_staff=True)
    client.force_login(staff)
    assert client.get(URL, {"q": "restor"}).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_message"))
    client.force_login(django_user_model.objects.get(pk=staff.pk))
    # Users' messages are shown only to those who may govern their conversations (issue 26).
    assert client.get(URL, {"q": "restor"}).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="govern_conversations"))
    client.force_login(django_user_model.objects.get(pk=staff.pk))
    assert len(contents(client.get(URL, {"q": "restor"}))) == 3
