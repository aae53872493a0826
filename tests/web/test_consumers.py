"""The WebSockets, through the real ASGI application: cookie authentication, refusal of other
users' sessions and of foreign origins, and the events of a turn."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import transaction
from django.urls import reverse

from core import events
from rollback_site.asgi import application
from tests.sockets import socket_headers

pytestmark = pytest.mark.django_db(transaction=True)


async def _connect(path: str, headers):
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=5)
    return communicator, connected


async def _refusal(path: str, headers) -> int | None:
    """How a socket without access is refused: the chat page's is accepted, then closed at once
    with its code, before any event (a browser sees no code of a refused handshake); the API's
    handshake is refused (None)."""
    communicator, connected = await _connect(path, headers)
    if not connected:
        return None
    output = await communicator.receive_output(timeout=5)
    assert output["type"] == "websocket.close", output
    await communicator.disconnect(timeout=10)
    return output["code"]


@pytest.mark.parametrize("path", ["/ws/chat/{pk}/", "/ws/v1/sessions/{pk}/"])
def test_the_owner_connects_and_another_user_is_refused(client, alice, bob, session, path):
    as_alice = socket_headers(alice)
    as_bob = socket_headers(bob)
    chat = path.startswith("/ws/chat/")

    async def run():
        mine, ok = await _connect(path.format(pk=session.pk), as_alice)
        assert ok
        await mine.disconnect(timeout=10)
        theirs = await _refusal(path.format(pk=session.pk), as_bob)
        assert theirs == (4404 if chat else None)
        nobody = await _refusal(path.format(pk=session.pk), [])
        assert nobody == (4401 if chat else None)
        missing = await _refusal(path.format(pk=999_999), as_alice)
        assert missing == (4404 if chat else None)

    async_to_sync(run)()


def test_a_socket_opened_from_another_site_is_refused(client, alice, session):
    headers = socket_headers(alice, origin="https://evil.example")

    async def run():
        _communicator, ok = await _connect(f"/ws/chat/{session.pk}/", headers)
        assert not ok

    async_to_sync(run)()


def test_the_event_stream_relays_the_contract_events_as_json(client, alice, session):
    headers = socket_headers(alice)

    async def run():
        path = f"/ws/v1/sessions/{session.pk}/"
        communicator, ok = await _connect(path, headers)
        assert ok
        await database_sync_to_async(events.message_delta)(session=session.pk, turn=7, delta="Hel")
        frame = json.loads(await communicator.receive_from(timeout=5))
        assert frame == {"type": "message.delta", "session": session.pk, "turn": 7, "delta": "Hel"}
        await communicator.disconnect(timeout=10)

    async_to_sync(run)()


def test_the_event_stream_relays_file_changes_and_approval_requests(client, alice, session):
    """What an integration needs to follow a workspace and answer an approval: a file written
    through the services arrives as `workspace.changed`, a pause as `tool.approval_requested`."""
    from sessions_app.selectors import current_branch
    from workspace.services import file_write

    headers = socket_headers(alice)

    def write() -> int:
        branch = current_branch(session)
        file_write(branch=branch, path="notes/plan.md", content="step one")
        return branch.pk

    def ask() -> None:
        with transaction.atomic():
            events.tool_approval_requested(
                session=session.pk,
                turn=7,
                tool_call_id="c1",
                tool_name="fs__drop",
                args={},
                call=1,
                attempt=1,
                note=None,
            )

    async def run():
        communicator, ok = await _connect(f"/ws/v1/sessions/{session.pk}/", headers)
        assert ok
        branch = await database_sync_to_async(write)()
        frame = json.loads(await communicator.receive_from(timeout=5))
        assert frame == {
            "type": "workspace.changed",
            "session": session.pk,
            "branch": branch,
            "paths": ["notes/plan.md"],
        }
        await database_sync_to_async(ask)()
        frame = json.loads(await communicator.receive_from(timeout=5))
        assert frame == {
            "type": "tool.approval_requested",
            "session": session.pk,
            "turn": 7,
            "tool_call_id": "c1",
            "tool_name": "fs__drop",
            "args": {},
            "call": 1,
            "attempt": 1,
            "note": None,
        }
        await communicator.disconnect(timeout=10)

    async_to_sync(run)()


def test_the_chat_socket_sends_html_fragments_with_the_delta_escaped(client, alice, session):
    headers = socket_headers(alice)
    refresh = reverse("chat:refresh", args=[session.pk])

    async def run():
        communicator, ok = await _connect(f"/ws/chat/{session.pk}/", headers)
        assert ok
        await database_sync_to_async(events.message_delta)(
            session=session.pk, turn=3, delta="<b>x</b>"
        )
        frame = await communicator.receive_from(timeout=5)
        assert 'id="turn-3-body" hx-swap-oob="beforeend"><span class="delta">' in frame
        assert "&lt;b&gt;x&lt;/b&gt;" in frame
        assert "<b>" not in frame
        await database_sync_to_async(events.turn_failed)(session=session.pk, turn=3, error="x")
        frame = await communicator.receive_from(timeout=5)
        # The page fetches its refresh itself (the socket renders nothing from the database).
        assert (
            f'id="live-refresh" hidden data-live-fetch hx-swap-oob="true" hx-get="{refresh}"'
            in frame
        )
        assert 'id="messages"' not in frame
        # Stopped (another turn: a turn ends once, and its end is sent once): the reply shown so
        # far is stored at once; the page fetches its refresh.
        await database_sync_to_async(events.turn_cancelled)(session=session.pk, turn=4)
        frame = await communicator.receive_from(timeout=5)
        assert 'id="live-refresh" hidden data-live-fetch' in frame
        assert 'id="messages"' not in frame
        # A piece the worker sends after the end is not added to the stored reply.
        await database_sync_to_async(events.message_delta)(
            session=session.pk, turn=4, delta="late", seq=9
        )
        assert await communicator.receive_nothing(timeout=0.3)
        await communicator.disconnect(timeout=10)

    async_to_sync(run)()
    client.force_login(alice)
    fetched = client.get(refresh).content.decode()
    assert 'id="messages"' in fetched
    assert 'id="branch-tree"' in fetched
    # The panel's list comes with the refresh, made for the page's own filter (its data-view),
    # which the refresh never replaces; nothing is left to fetch.
    assert 'id="checkpoint-reload"' not in fetched
    assert 'id="checkpoint-list"' in fetched
    assert 'data-view="all|all|0"' in fetched
    assert 'id="checkpoint-filter"' not in fetched
    # Only the composer's buttons are swapped, never its textarea: a draft survives.
    assert 'id="composer-actions"' in fetched
    assert 'id="composer"' not in fetched


def test_a_renamed_session_updates_the_pages_header_and_sidebar_entry_live(client, alice, session):
    from sessions_app.services import session_update

    headers = socket_headers(alice)
    refresh = reverse("chat:refresh", args=[session.pk])

    async def run():
        communicator, ok = await _connect(f"/ws/chat/{session.pk}/", headers)
        assert ok
        await database_sync_to_async(session_update)(
            session=session, name="<i>Titled</i>", archived=True
        )
        frame = await communicator.receive_from(timeout=5)
        # The sidebar's entry at once, from the event; the header with the page's refresh.
        assert f'id="session-link-{session.pk}" hx-swap-oob="morph"' in frame
        assert frame.count("&lt;i&gt;Titled&lt;/i&gt;") >= 2
        assert "<i>" not in frame
        assert f'hx-get="{refresh}"' in frame
        # Never the composer: a draft survives.
        assert 'id="composer"' not in frame
        assert 'id="messages"' not in frame
        await communicator.disconnect(timeout=10)

    async_to_sync(run)()
    client.force_login(alice)
    fetched = client.get(refresh).content.decode()
    assert 'id="conv-header" hx-swap-oob="morph"' in fetched
    assert "&lt;i&gt;Titled&lt;/i&gt;" in fetched
    assert "<i>" not in fetched
    assert 'data-testid="archived-badge"' in fetched
    assert 'id="composer"' not in fetched


def test_bob_hears_nothing_of_alices_session(client, alice, bob, session):
    from sessions_app.services import session_create

    bobs = session_create(owner=bob, name="bob's")
    headers = socket_headers(bob)

    async def run():
        communicator, ok = await _connect(f"/ws/v1/sessions/{bobs.pk}/", headers)
        assert ok
        await database_sync_to_async(events.message_delta)(
            session=session.pk, turn=1, delta="secret"
        )
        assert await communicator.receive_nothing(timeout=0.5)
        await communicator.disconnect(timeout=10)

    async_to_sync(run)()
