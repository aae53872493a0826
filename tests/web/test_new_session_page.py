"""The chat page's "New session" (the sidebar's button, Ctrl+Shift+O; issue 39): a blank session
is opened again instead of storing another, and the API still makes one at each call."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from checkpoints.services import checkpoint_create
from sessions_app.models import Branch, Session
from sessions_app.services import session_create, session_settings_update, session_update
from tests.conftest import say
from workspace.services import file_write

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def new_session(client) -> int:
    """Click "New session"; the id of the session it opens."""
    response = client.post(reverse("chat:new"))
    assert response.status_code == 302
    return Session.objects.get(pk=int(response["Location"].rstrip("/").rsplit("/", 1)[1])).pk


def test_new_session_twice_opens_the_same_blank_session_listed_once(as_alice, alice):
    first = new_session(as_alice)
    assert new_session(as_alice) == first
    assert new_session(as_alice) == first
    assert Session.objects.filter(owner=alice).count() == 1
    page = as_alice.get(reverse("chat:session", args=[first])).content.decode()
    assert page.count(f'id="session-{first}"') == 1
    assert page.count('data-testid="session"') == 1


def test_new_session_from_a_used_session_goes_to_the_blank_one_at_the_top(as_alice, alice):
    blank = new_session(as_alice)
    Session.objects.filter(pk=blank).update(updated_at=timezone.now() - timedelta(days=30))
    used = session_create(owner=alice, name="Trip")
    say(Branch.objects.get(session=used), "hello", "hi")

    assert new_session(as_alice) == blank
    assert Session.objects.filter(owner=alice).count() == 2
    listed = as_alice.get(reverse("chat:session_list")).content.decode()
    assert listed.index(f'id="session-{blank}"') < listed.index(f'id="session-{used.pk}"')
    assert listed.count(f'id="session-{blank}"') == 1


def _message(session: Session) -> None:
    say(Branch.objects.get(session=session), "hello")


def _renamed(session: Session) -> None:
    session_update(session=session, name="Groceries")


def _archived(session: Session) -> None:
    session_update(session=session, archived=True)


def _pinned(session: Session) -> None:
    session_update(session=session, pinned=True)


def _instructions(session: Session) -> None:
    session_settings_update(session=session, instructions="Answer in French.")


def _file(session: Session) -> None:
    file_write(branch=Branch.objects.get(session=session), path="notes.md", content="hello")


def _checkpoint(session: Session) -> None:
    checkpoint_create(branch=Branch.objects.get(session=session), name="start")


@pytest.mark.parametrize(
    "touch", [_message, _renamed, _archived, _pinned, _instructions, _file, _checkpoint]
)
def test_new_session_makes_a_new_one_when_the_last_is_not_blank(as_alice, alice, touch):
    before = new_session(as_alice)
    touch(Session.objects.get(pk=before))
    after = new_session(as_alice)
    assert after != before
    assert Session.objects.filter(owner=alice).count() == 2


def test_settings_put_back_to_the_defaults_leave_it_blank(as_alice, alice):
    blank = new_session(as_alice)
    session = Session.objects.get(pk=blank)
    session_settings_update(session=session, instructions="Answer in French.")
    session_settings_update(session=session, instructions="")
    assert new_session(as_alice) == blank


def test_new_session_never_opens_bobs_blank_session(client, alice, bob):
    bobs = session_create(owner=bob)
    client.force_login(alice)
    assert new_session(client) != bobs.pk
    assert Session.objects.filter(owner=bob).count() == 1


def test_the_api_still_makes_a_session_at_each_post(as_alice, alice):
    new_session(as_alice)  # a blank session the API does not take
    ids = set()
    for _ in range(3):
        body = {"name": "New session"}
        response = as_alice.post("/api/v1/sessions/", body, content_type="application/json")
        assert response.status_code == 201
        ids.add(response.json()["id"])
    assert len(ids) == 3
    assert Session.objects.filter(owner=alice).count() == 4


@pytest.mark.django_db(transaction=True)
def test_a_double_click_makes_one_session(alice):
    """Two "New session" requests at once (a double click, or a click again while the first
    answer is slow) end with one blank session, which both open."""
    clients = [Client() for _ in range(2)]
    for client in clients:
        client.force_login(alice)
    opened: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(clients))

    def click(client: Client) -> None:
        try:
            barrier.wait()
            opened.append(new_session(client))
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=click, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert Session.objects.filter(owner=alice).count() == 1
    assert opened == [Session.objects.get(owner=alice).pk] * 2
