"""The owner's side of governance: the chat page says an administrator restored or rewound the
conversation, and why (never who), live in every tab and on later loads, until dismissed."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from checkpoints.services import checkpoint_create
from governance.models import AuditRecord
from governance.services import restore_on_behalf
from sessions_app.models import Branch
from sessions_app.services import session_create
from tests.conftest import say
from tests.sockets import socket_headers

XSS = '<img src=x onerror="alert(1)">'


@pytest.fixture
def governor(django_user_model):
    user = django_user_model.objects.create_user("governor-jane", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="govern_conversations"))
    return django_user_model.objects.get(pk=user.pk)


@pytest.fixture
def marked(session, branch):
    say(branch, "first question", "first answer")
    checkpoint = checkpoint_create(branch=branch, name=f"safe point {XSS}")
    say(branch, "second question", "second answer")
    return checkpoint


def page(client, session) -> str:
    response = client.get(reverse("chat:session", args=[session.pk]))
    assert response.status_code == 200
    return response.content.decode()


def notices(body: str) -> list[str]:
    return [part.split("</div>")[0] for part in body.split('data-testid="admin-notice"')[1:]]


@pytest.mark.django_db
def test_the_chat_page_says_an_administrator_restored_and_why_without_naming_them(
    client, alice, governor, session, marked
):
    restore_on_behalf(
        actor=governor, checkpoint=marked, mode="branch", reason=f"You asked us to. {XSS}"
    )
    client.force_login(alice)

    body = page(client, session)

    [notice] = notices(body)
    text = " ".join(notice.split())
    assert "An administrator restored checkpoint “safe point &lt;img" in text
    assert "as a new branch (" in text
    assert "You asked us to. &lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in text
    assert XSS not in body
    assert "governor-jane" not in body


@pytest.mark.django_db
def test_a_rewind_notice_says_what_was_removed(client, alice, governor, session, marked):
    restore_on_behalf(actor=governor, checkpoint=marked, mode="rewind", reason="Cleanup")
    client.force_login(alice)
    [notice] = notices(page(client, session))
    text = " ".join(notice.split())
    assert "An administrator rewound this conversation to checkpoint" in text
    assert "removing 2 messages, 0 checkpoints and 0 branches that came after it" in text


@pytest.mark.django_db
def test_the_pages_refresh_carries_the_notice_so_every_open_tab_shows_it(
    client, alice, governor, session, marked
):
    client.force_login(alice)
    refresh = reverse("chat:refresh", args=[session.pk])
    assert notices(client.get(refresh).content.decode()) == []
    restore_on_behalf(actor=governor, checkpoint=marked, mode="branch", reason="Fixing")
    fetched = client.get(refresh).content.decode()
    assert '<div id="notices" hx-swap-oob="morph">' in fetched
    assert len(notices(fetched)) == 1


@pytest.mark.django_db
def test_the_owner_dismisses_it_and_it_stays_gone(client, alice, governor, session, marked):
    record = restore_on_behalf(actor=governor, checkpoint=marked, mode="branch", reason="Fixing")
    client.force_login(alice)
    url = reverse("chat:admin_notice_dismiss", args=[session.pk, record.pk])

    response = client.post(url, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert notices(response.content.decode()) == []
    assert notices(page(client, session)) == []
    record.refresh_from_db()
    assert record.acknowledged_at is not None
    # Without htmx: back to the page.
    again = client.post(url)
    assert again.status_code == 302


@pytest.mark.django_db
def test_bob_cannot_see_or_dismiss_alices_notice(client, alice, bob, governor, session, marked):
    record = restore_on_behalf(actor=governor, checkpoint=marked, mode="branch", reason="Fixing")
    bobs = session_create(owner=bob, name="bob's")
    client.force_login(bob)
    assert notices(page(client, bobs)) == []
    for pk in (session.pk, bobs.pk):
        response = client.post(reverse("chat:admin_notice_dismiss", args=[pk, record.pk]))
        assert response.status_code == 404
    record.refresh_from_db()
    assert record.acknowledged_at is None


@pytest.mark.django_db
def test_a_notice_is_only_shown_in_its_own_session(client, alice, governor, session, marked):
    restore_on_behalf(actor=governor, checkpoint=marked, mode="branch", reason="Fixing")
    other = session_create(owner=alice, name="another")
    client.force_login(alice)
    assert notices(page(client, other)) == []
    assert AuditRecord.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_restore_and_the_dismissal_reach_every_open_page_but_no_integration(alice, governor):
    from rollback_site.asgi import application

    session = session_create(owner=alice, name="watched")
    branch = Branch.objects.get(session=session)
    say(branch, "q", "a")
    checkpoint = checkpoint_create(branch=branch, name="cp")
    headers = socket_headers(alice)
    refresh = reverse("chat:refresh", args=[session.pk])

    async def run():
        page_socket = WebsocketCommunicator(application, f"/ws/chat/{session.pk}/", headers)
        api_socket = WebsocketCommunicator(application, f"/ws/v1/sessions/{session.pk}/", headers)
        assert (await page_socket.connect(timeout=5))[0]
        assert (await api_socket.connect(timeout=5))[0]
        record = await database_sync_to_async(restore_on_behalf)(
            actor=governor, checkpoint=checkpoint, mode="branch", reason="Fixing"
        )
        # The restore's own events: the page fetches its refresh, the integration hears them.
        assert f'hx-get="{refresh}"' in await page_socket.receive_from(timeout=5)
        assert '"branch.changed"' in await api_socket.receive_from(timeout=5)
        while not await api_socket.receive_nothing(timeout=0.3):
            pass  # checkpoint.deleted (none deleted) and the like
        while not await page_socket.receive_nothing(timeout=0.3):
            pass

        owner = Client()
        await database_sync_to_async(owner.force_login)(alice)
        url = reverse("chat:admin_notice_dismiss", args=[session.pk, record.pk])
        response = await database_sync_to_async(owner.post)(url, HTTP_HX_REQUEST="true")
        assert response.status_code == 200
        # Every page of the session fetches its refresh; the integration hears nothing.
        assert f'hx-get="{refresh}"' in await page_socket.receive_from(timeout=5)
        assert await api_socket.receive_nothing(timeout=0.5)
        await page_socket.disconnect(timeout=10)
        await api_socket.disconnect(timeout=10)

    async_to_sync(run)()
