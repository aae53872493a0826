"""The sidebar past its first page, pins, the Markdown download, and a message sent in an
archived session, through HTTP; and the chat page's socket hearing of its user's other
sessions (made, changed, deleted)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.urls import reverse
from django.utils import timezone

from rollback_site.asgi import application
from sessions_app.models import Session
from sessions_app.services import message_append, session_create, session_delete, session_update
from tests.sockets import socket_headers
from web.pages.session_list import SIDEBAR_PAGE

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def _names(body: str) -> list[str]:
    return re.findall(r'data-testid="session-link">([^<]*)</a>', body)


def _next_page(body: str) -> str | None:
    found = re.search(r'data-testid="more-sessions"[^>]*hx-get="([^"]+)"', body)
    return found.group(1).replace("&amp;", "&") if found else None


def _many(owner, count: int, *, days_ago: int = 0) -> list[Session]:
    """`count` sessions, the first one the most recently active."""
    now = timezone.now() - timedelta(days=days_ago)
    rows = [
        Session(owner=owner, session_name=f"Chat {n:03}", updated_at=now - timedelta(seconds=n))
        for n in range(count)
    ]
    return Session.objects.bulk_create(rows)


@pytest.mark.django_db
def test_the_sidebar_pages_through_every_session_keeping_its_date_groups(as_alice, alice):
    _many(alice, SIDEBAR_PAGE + 10)
    _many(alice, SIDEBAR_PAGE, days_ago=30)
    old = Session.objects.filter(updated_at__lt=timezone.now() - timedelta(days=20))
    Session.objects.filter(pk__in=old.values("pk")).update(session_name="Old")
    first = as_alice.get(reverse("chat:session_list"), **HX).content.decode()
    assert len(_names(first)) == SIDEBAR_PAGE
    assert first.count('data-testid="session-group"') == 1  # Today
    seen = _names(first)
    url = _next_page(first)
    pages = 1
    while url:
        body = as_alice.get(url, **HX).content.decode()
        assert 'id="session-list"' not in body  # a page goes in place of the button
        seen += _names(body)
        if pages == 1:  # goes on with "Today" (no heading again), then starts "Older"
            assert body.count('data-testid="session-group"') == 1
            assert body.index("Chat ") < body.index(">Older<")
        url = _next_page(body)
        pages += 1
    assert pages == 3
    assert seen == [f"Chat {n:03}" for n in range(SIDEBAR_PAGE + 10)] + ["Old"] * SIDEBAR_PAGE


@pytest.mark.django_db
def test_a_search_pages_too_and_a_bad_offset_is_refused(as_alice, alice):
    _many(alice, SIDEBAR_PAGE + 3)
    first = as_alice.get(reverse("chat:session_list"), {"q": "Chat"}, **HX).content.decode()
    url = _next_page(first)
    assert url is not None
    assert "q=Chat" in url
    assert len(_names(as_alice.get(url, **HX).content.decode())) == 3
    for bad in ("-1", "x", "1e9", "99999999999"):
        response = as_alice.get(reverse("chat:session_list"), {"offset": bad}, **HX)
        assert response.status_code == 400
        assert "offset must be a non-negative integer" in response.content.decode()


@pytest.mark.django_db
def test_pinned_sessions_stay_on_top_under_their_own_heading(as_alice, alice, session):
    busy = session_create(owner=alice, name="Busy")
    message_append(branch=busy.branches.get(), role="user", content="still talking")
    url = reverse("chat:pin", args=[session.pk]) + f"?current={busy.pk}"
    body = as_alice.post(url, **HX).content.decode()
    assert _names(body) == ["Python basics", "Busy"]
    assert body.index(">Pinned<") < body.index("Python basics") < body.index(">Today<")
    assert 'data-testid="unpin-session"' in body
    # It stays on top, however active the others are.
    message_append(branch=busy.branches.get(), role="user", content="and again")
    assert _names(as_alice.get(reverse("chat:session_list"), **HX).content.decode())[0] == (
        "Python basics"
    )
    body = as_alice.post(reverse("chat:unpin", args=[session.pk]), **HX).content.decode()
    assert _names(body) == ["Busy", "Python basics"]
    assert ">Pinned<" not in body


@pytest.mark.django_db
def test_bob_cannot_pin_or_unpin_alices_session(client, bob, session):
    client.force_login(bob)
    session_update(session=session, pinned=True)
    for name in ("chat:pin", "chat:unpin"):
        assert client.post(reverse(name, args=[session.pk]), **HX).status_code == 404
    session.refresh_from_db()
    assert session.pinned_at is not None


@pytest.mark.django_db
def test_the_page_downloads_the_current_branch_as_markdown(as_alice, client, bob, session, branch):
    message_append(branch=branch, role="user", content="*args stays *args")
    url = reverse("chat:export", args=[session.pk])
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert f'href="{url}?format=markdown"' in page
    response = as_alice.get(url, {"format": "markdown"})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == (
        f'attachment; filename="rollback-Python-basics-{session.pk}.md"'
    )
    assert "```text\n*args stays *args\n```" in response.content.decode()
    assert as_alice.get(url, {"format": "docx"}, **HX).status_code == 400
    client.force_login(bob)
    assert client.get(url, {"format": "markdown"}).status_code == 404


@pytest.mark.django_db
def test_a_message_sent_in_an_archived_session_brings_it_back_and_says_so(
    as_alice, session, fake_llm, inline_turns
):
    session_update(session=session, archived=True)
    response = as_alice.post(reverse("chat:send", args=[session.pk]), {"message": "hi"}, **HX)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'data-testid="unarchived-notice"' in body
    assert "back from the archive" in body
    session.refresh_from_db()
    assert session.archived_at is None
    again = as_alice.post(reverse("chat:send", args=[session.pk]), {"message": "more"}, **HX)
    assert "unarchived-notice" not in again.content.decode()


# --- the socket: the user's other sessions --------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_chat_page_lists_its_sessions_again_when_another_is_made_changed_or_deleted(
    alice, bob, session
):
    shown_elsewhere = session_create(owner=alice, name="Another tab")
    bobs = session_create(owner=bob, name="bob's")
    list_url = reverse("chat:session_list")
    headers = socket_headers(alice)

    async def run():
        socket = WebsocketCommunicator(application, f"/ws/chat/{session.pk}/", headers)
        assert (await socket.connect(timeout=5))[0]
        stream = WebsocketCommunicator(application, f"/ws/v1/sessions/{session.pk}/", headers)
        assert (await stream.connect(timeout=5))[0]
        made = await database_sync_to_async(session_create)(owner=alice, name="New one")
        for change in (
            lambda: session_update(session=shown_elsewhere, pinned=True),
            lambda: session_update(session=shown_elsewhere, archived=True),
            lambda: session_delete(session=made),
        ):
            frame = await socket.receive_from(timeout=5)
            assert 'id="sessions-refresh"' in frame
            assert f'hx-get="{list_url}"' in frame
            await database_sync_to_async(change)()
        frame = await socket.receive_from(timeout=5)
        assert 'id="sessions-refresh"' in frame
        # Bob's sessions are none of this page's business; the contract's stream relays none.
        await database_sync_to_async(session_update)(session=bobs, pinned=True)
        assert await socket.receive_nothing(timeout=0.5)
        assert await stream.receive_nothing(timeout=0.5)
        await socket.disconnect(timeout=10)
        await stream.disconnect(timeout=10)

    async_to_sync(run)()


@pytest.mark.django_db
def test_the_list_after_a_change_keeps_as_many_sessions_as_it_showed(as_alice, alice):
    made = _many(alice, SIDEBAR_PAGE + 20)
    url = reverse("chat:session_list")
    assert len(_names(as_alice.get(url, {"shown": "65"}, **HX).content.decode())) == 65
    # Never fewer than a page, and a bad count is refused.
    assert len(_names(as_alice.get(url, {"shown": "3"}, **HX).content.decode())) == SIDEBAR_PAGE
    assert as_alice.get(url, {"shown": "many"}, **HX).status_code == 400
    # An entry's own action (its form body carries the count) answers with as many.
    pin = reverse("chat:pin", args=[made[-1].pk])
    body = as_alice.post(pin, {"shown": "70"}, **HX).content.decode()
    assert len(_names(body)) == 70
    assert _names(body)[0] == f"Chat {SIDEBAR_PAGE + 19:03}"
    assert _next_page(body) is None
