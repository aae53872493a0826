"""The chat page while a turn waits for an approval: the card with the call (its arguments as
escaped JSON) and Approve / Refuse, in every open tab, live; gone when the wait ends; Stop still
there."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from rollback_site.asgi import application
from sessions_app.approvals import args_digest
from sessions_app.models import Turn
from sessions_app.turns import turn_claim, turn_start
from tests.agents import approval_tools
from tests.sockets import socket_headers

pytestmark = pytest.mark.django_db(transaction=True)

NASTY = {"to": "<script>alert(1)</script>", "subject": "\"quoted\" & 'single'"}


def paused(session) -> Turn:
    """A claimed turn paused on a call of send_email, as the worker pauses it."""
    turn = turn_claim(turn_id=turn_start(session=session, message="mail them").pk)
    assert turn is not None
    assert approval_tools.pause(turn, "call_1", NASTY)
    return turn


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def answer(client: Client, session, turn: Turn, approved: str, call_id: str = "call_1"):
    return client.post(
        f"/chat/{session.pk}/turns/{turn.pk}/approve/",
        {"tool_call_id": call_id, "approved": approved},
        HTTP_HX_REQUEST="true",
    )


def test_the_page_shows_the_waiting_call_escaped_with_approve_refuse_and_stop(alice, session):
    turn = paused(session)
    page = logged_in(alice).get(f"/chat/{session.pk}/").content.decode()
    assert 'data-testid="approval"' in page
    assert 'data-testid="approval-tool">send_email<' in page
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'data-testid="approve"' in page
    assert 'data-testid="refuse"' in page
    assert f"/chat/{session.pk}/turns/{turn.pk}/approve/" in page
    assert f"/chat/{session.pk}/turns/{turn.pk}/cancel/" in page  # Stop works during the pause


def test_approve_from_the_page_lets_the_turn_go_on_and_the_card_goes(alice, session):
    turn = paused(session)
    response = answer(logged_in(alice), session, turn, "true")
    assert response.status_code == 200
    assert response.content == b""
    turn.refresh_from_db()
    assert turn.status in ("queued", "running", "done")  # its continuation is queued
    assert turn.metadata["approvals"]["1:1"]["approved"] is True
    page = logged_in(alice).get(f"/chat/{session.pk}/").content.decode()
    assert 'data-testid="approval"' not in page


def test_refuse_from_the_page_is_recorded_as_refused(alice, session):
    turn = paused(session)
    assert answer(logged_in(alice), session, turn, "false").status_code == 200
    turn.refresh_from_db()
    given = turn.metadata["approvals"]["1:1"]
    assert given.pop("answered_at")
    assert given == {
        "tool_call_id": "call_1",
        "tool_name": "send_email",
        "args": NASTY,
        "args_sha256": args_digest(NASTY),
        "attempt": 1,
        "call": 1,
        "approved": False,
        "reason": "refused",
    }


def test_bob_cannot_answer_alices_call_and_bad_answers_change_nothing(alice, bob, session):
    turn = paused(session)
    assert answer(logged_in(bob), session, turn, "true").status_code == 404
    assert answer(logged_in(alice), session, turn, "maybe").status_code == 400
    assert answer(logged_in(alice), session, turn, "true", call_id="").status_code == 400
    assert answer(logged_in(alice), session, turn, "true", call_id="call_2").status_code == 409
    turn.refresh_from_db()
    assert turn.status == "awaiting_approval"
    assert "approvals" not in turn.metadata


def test_a_second_click_after_the_answer_is_a_409_notice_that_says_why(alice, session):
    turn = paused(session)
    page = logged_in(alice).get(f"/chat/{session.pk}/").content.decode()
    assert '<input type="hidden" name="call" value="1">' in page
    assert '<input type="hidden" name="attempt" value="1">' in page
    client = logged_in(alice)
    body = {"tool_call_id": "call_1", "call": "1", "attempt": "1", "approved": "true"}
    url = f"/chat/{session.pk}/turns/{turn.pk}/approve/"
    assert client.post(url, body, HTTP_HX_REQUEST="true").status_code == 200
    again = client.post(url, {**body, "approved": "false"}, HTTP_HX_REQUEST="true")
    assert again.status_code == 409
    assert again["HX-Retarget"] == "#notices"
    assert "already answered (approved)" in again.content.decode()
    stale = client.post(url, {**body, "attempt": "x"}, HTTP_HX_REQUEST="true")
    assert stale.status_code == 400
    turn.refresh_from_db()
    assert turn.metadata["approvals"]["1:1"]["approved"] is True


def test_a_call_that_may_have_run_says_so_on_its_card(alice, session):
    turn = turn_claim(turn_id=turn_start(session=session, message="mail them").pk)
    assert turn is not None
    turn.metadata = {
        **turn.metadata,
        "may_have_run": [
            {
                "tool_call_id": "call_0",
                "tool_name": "send_email",
                "args": NASTY,
                "args_sha256": args_digest(NASTY),
                "attempt": 1,
                "call": 1,
            }
        ],
    }
    assert approval_tools.pause(turn, "call_1", NASTY)
    page = logged_in(alice).get(f"/chat/{session.pk}/").content.decode()
    assert 'data-testid="approval-may-have-run"' in page
    assert "This call may already have run: attempt 1 of this turn approved" in page


def test_every_open_tab_gets_the_card_live_and_loses_it_when_one_tab_answers(alice, session):
    headers = socket_headers(alice)

    async def receive_until(tab, marker: str) -> str:
        while True:
            frame = await tab.receive_from(timeout=5)
            if marker in frame:
                return frame

    async def run():
        tabs = []
        for _ in range(2):
            tab = WebsocketCommunicator(application, f"/ws/chat/{session.pk}/", headers=headers)
            connected, _ = await tab.connect(timeout=5)
            assert connected
            tabs.append(tab)
        turn = await database_sync_to_async(paused)(session)
        for tab in tabs:
            frame = await receive_until(tab, 'data-testid="approval"')
            assert f'id="turn-{turn.pk}-approval"' in frame
            assert "&lt;script&gt;" in frame
            assert "<script>" not in frame
            # ... and has the page fetch its refresh, which shows the card too: a refresh asked
            # for before the card came (at the turn's start) cannot morph it away.
            assert 'id="live-refresh"' in frame
        refresh = await database_sync_to_async(
            lambda: logged_in(alice).get(f"/chat/{session.pk}/refresh/").content.decode()
        )()
        assert 'data-testid="approval"' in refresh
        # One tab answers (its request); every tab's card goes with the answer's event.
        response = await database_sync_to_async(
            lambda: answer(logged_in(alice), session, turn, "false")
        )()
        assert response.status_code == 200
        for tab in tabs:
            frame = await receive_until(tab, f'id="turn-{turn.pk}-approval"')
            assert 'data-testid="approval"' not in frame
            assert 'id="live-refresh"' in frame
            await tab.disconnect(timeout=10)

    async_to_sync(run)()
