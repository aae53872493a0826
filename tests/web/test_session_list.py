"""The sidebar's list of sessions through HTTP: order by last activity grouped by date, search
over names and message text, archive and unarchive, rename in place, delete without leaving."""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from sessions_app.models import Session
from sessions_app.services import message_append, session_create

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def _names(body: str) -> list[str]:
    """The session names of a rendered list, in order."""
    return re.findall(r'data-testid="session-link">([^<]*)</a>', body)


def _aged(session: Session, days: int) -> None:
    """Last active at noon `days` days ago (local time), whatever the time now."""
    noon = datetime.combine(timezone.localdate() - timedelta(days=days), time(12))
    Session.objects.filter(pk=session.pk).update(updated_at=timezone.make_aware(noon))


def test_the_sidebar_lists_sessions_by_last_activity_under_date_headings(as_alice, alice):
    old = session_create(owner=alice, name="Old chat")
    week = session_create(owner=alice, name="This week")
    busy = session_create(owner=alice, name="Busy chat")
    fresh = session_create(owner=alice, name="Made last")
    _aged(old, 40)
    _aged(week, 3)
    _aged(fresh, 1)
    # The oldest-made session has the newest message: it comes first.
    message_append(branch=busy.branches.get(), role="user", content="still talking")
    body = as_alice.get(reverse("chat:session_list"), **HX).content.decode()
    assert _names(body) == ["Busy chat", "Made last", "This week", "Old chat"]
    headings = [h for h in ("Today", "Yesterday", "Previous 7 days", "Older") if h in body]
    assert headings == ["Today", "Yesterday", "Previous 7 days", "Older"]
    assert body.index("Today") < body.index("Busy chat") < body.index("Yesterday")
    assert body.index("Previous 7 days") < body.index("This week") < body.index("Older")


def test_the_sidebar_search_finds_a_word_that_is_only_in_a_message(as_alice, alice):
    hit = session_create(owner=alice, name="New session")
    session_create(owner=alice, name="Other")
    message_append(branch=hit.branches.get(), role="user", content="hello two worlds")
    body = as_alice.get(reverse("chat:session_list"), {"q": "hello two"}, **HX).content.decode()
    assert _names(body) == ["New session"]


def test_a_search_of_quotes_and_operators_is_answered_with_a_list(as_alice, alice, session):
    for query in ('"', 'a" OR "b', "NEAR(a b)", "*", "x" * 10_000, "-", "(", "title:x"):
        response = as_alice.get(reverse("chat:session_list"), {"q": query}, **HX)
        assert response.status_code == 200, query
        assert 'id="session-list"' in response.content.decode()


def test_archive_and_unarchive_from_the_sidebar(as_alice, alice, session):
    other = session_create(owner=alice, name="Keep me")
    url = reverse("chat:archive", args=[session.pk]) + f"?current={other.pk}"
    body = as_alice.post(url, **HX).content.decode()
    session.refresh_from_db()
    assert session.archived_at is not None
    assert _names(body) == ["Keep me"]
    assert 'data-testid="show-archived"' in body
    # The archived view lists it, with Unarchive.
    archived = as_alice.get(reverse("chat:session_list"), {"archived": "1"}, **HX)
    body = archived.content.decode()
    assert _names(body) == ["Python basics"]
    assert 'data-testid="unarchive-session"' in body
    # Its page still opens, and says it is archived.
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-testid="archived-badge"' in page
    # Unarchived from the archived view: it leaves that view and is back in the list.
    url = reverse("chat:unarchive", args=[session.pk]) + "?archived=1"
    body = as_alice.post(url, **HX).content.decode()
    assert _names(body) == []
    assert "No archived sessions." in body
    session.refresh_from_db()
    assert session.archived_at is None
    body = as_alice.get(reverse("chat:session_list"), **HX).content.decode()
    assert set(_names(body)) == {"Python basics", "Keep me"}


def test_archiving_the_shown_session_updates_its_header(as_alice, session):
    url = reverse("chat:archive", args=[session.pk]) + f"?current={session.pk}"
    body = as_alice.post(url, **HX).content.decode()
    assert 'id="conv-header" hx-swap-oob="morph"' in body
    assert "archived-badge" in body


def test_bob_cannot_archive_or_unarchive_alices_session(client, bob, session):
    client.force_login(bob)
    for name in ("chat:archive", "chat:unarchive"):
        response = client.post(reverse(name, args=[session.pk]), **HX)
        assert response.status_code == 404
    session.refresh_from_db()
    assert session.archived_at is None


def test_the_rename_form_holds_the_current_name(as_alice, session):
    url = reverse("chat:rename", args=[session.pk]) + f"?current={session.pk}"
    body = as_alice.get(url, **HX).content.decode()
    assert 'data-testid="rename-form"' in body
    assert 'value="Python basics"' in body
    assert f'hx-post="{url}"' in body
    assert 'data-testid="rename-cancel"' in body


def test_a_refused_name_is_shown_in_the_form_and_nothing_changes(as_alice, session):
    url = reverse("chat:rename", args=[session.pk])
    response = as_alice.post(url, {"name": "n" * 201}, **HX)
    body = response.content.decode()
    assert response.status_code == 400
    assert response["HX-Retarget"] == f"#session-{session.pk}"
    assert 'data-testid="rename-error"' in body
    assert "limit is 200" in body
    assert 'value="' + "n" * 201 + '"' in body  # what was typed stays to be corrected
    session.refresh_from_db()
    assert session.session_name == "Python basics"


def test_deleting_another_session_keeps_the_page_and_only_removes_it(as_alice, alice, session):
    other = session_create(owner=alice, name="Delete me")
    url = reverse("chat:delete", args=[other.pk]) + f"?current={session.pk}"
    response = as_alice.post(url, **HX)
    assert response.status_code == 200
    assert "HX-Redirect" not in response
    assert _names(response.content.decode()) == ["Python basics"]
    assert list(Session.objects.values_list("pk", flat=True)) == [session.pk]


def test_deleting_the_shown_session_goes_home(as_alice, alice, session):
    url = reverse("chat:delete", args=[session.pk]) + f"?current={session.pk}"
    response = as_alice.post(url, **HX)
    assert response.status_code == 204
    assert response["HX-Redirect"] == "/chat/"
    assert not Session.objects.exists()


def test_home_opens_the_most_recently_active_session_not_an_archived_one(as_alice, alice):
    first = session_create(owner=alice, name="First")
    second = session_create(owner=alice, name="Second")
    message_append(branch=first.branches.get(), role="user", content="back to this one")
    home = reverse("chat:home")
    assert as_alice.get(home)["Location"] == reverse("chat:session", args=[first.pk])
    as_alice.post(reverse("chat:archive", args=[first.pk]), **HX)
    assert as_alice.get(home)["Location"] == reverse("chat:session", args=[second.pk])
