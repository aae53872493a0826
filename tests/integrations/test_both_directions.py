"""A linked chat's conversation typed into from the web app: the chat shows the message and its
reply too (the relay adopts the turn), against the stand-in for Telegram and the fake Chat
Completions server, the turn running on the embedded mode's pool."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.dispatch import drain
from agents.services import chat_submit
from integrations.models import TelegramChat, TelegramReply
from integrations.telegram import relay
from integrations.telegram.conversations import chat_of_key, chat_session, session_key
from integrations.telegram.format import render
from sessions_app.models import Turn
from tests.fakes.chat_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)

CHAT = 7170
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def relayed(telegram, fake_llm, celery_eager):
    yield telegram
    drain()
    assert relay.idle(15)


def send_from_the_web(client, user, session, text: str) -> Turn:
    client.force_login(user)
    response = client.post(reverse("chat:send", args=[session.pk]), {"message": text}, **HX)
    assert response.status_code == 200, response.content
    drain()
    assert relay.idle(15)
    return Turn.objects.filter(session=session).latest("pk")


def test_a_message_typed_in_the_web_app_shows_in_the_chat_with_its_reply(
    relayed, fake_llm, alice, client
):
    TelegramChat.objects.create(chat_id=CHAT, user=alice)
    session = chat_session(user=alice, chat_id=CHAT)
    fake_llm.queue(Reply("**Yes**, from the model.", delay=0.05))
    turn = send_from_the_web(client, alice, session, "Asked <b>in</b> the browser")
    assert turn.status == "done"
    shown = relayed.messages(CHAT)
    assert [m["text"] for m in shown] == [
        f"{relay.ASKED_ELSEWHERE}\nAsked <b>in</b> the browser",  # plain text, as typed
        render(turn.reply)[0].text,
    ]
    assert "entities" not in relayed.sent("sendMessage", chat_id=CHAT)[0].params
    assert shown[-1]["entities"] == render(turn.reply)[0].entity_dicts()
    row = TelegramReply.objects.get(pk=turn.pk)
    assert row.chat_id == CHAT
    assert row.delivered_at is not None
    assert row.message_ids == [shown[-1]["message_id"]]


def test_a_chat_linked_to_someone_else_or_to_nobody_is_never_sent_the_sessions_turns(
    relayed, fake_llm, alice, bob, client
):
    """alice's session still bears the key of a chat that is now bob's (he linked it since), or
    of a chat nobody linked: neither chat hears of alice's turns."""
    TelegramChat.objects.create(chat_id=CHAT, user=bob)
    theirs = chat_session(user=alice, chat_id=CHAT)
    nobodys = chat_session(user=alice, chat_id=CHAT + 1)
    fake_llm.queue(Reply("for alice only"), Reply("for alice alone"))
    for session in (theirs, nobodys):
        turn = send_from_the_web(client, alice, session, "private")
        assert turn.reply.startswith("for alice")
        assert not TelegramReply.objects.filter(pk=turn.pk).exists()
    assert relayed.calls == []


def test_a_deactivated_owner_s_chat_is_not_sent_the_sessions_turns(
    relayed, fake_llm, alice, bob, client
):
    """A turn made in the session while its owner is deactivated (here through the service, as
    an operator's script could) does not reach the chat, which the bridge refuses too."""
    TelegramChat.objects.create(chat_id=CHAT, user=alice)
    chat_session(user=alice, chat_id=CHAT)
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    fake_llm.queue(Reply("not relayed"))
    turn = chat_submit(owner=alice, session_key=session_key(CHAT), message="hi")
    drain()
    assert relay.idle(15)
    turn.refresh_from_db()
    assert turn.reply == "not relayed"
    assert not TelegramReply.objects.filter(pk=turn.pk).exists()
    assert relayed.calls == []


def test_chat_of_key_reads_only_the_bridges_keys():
    assert chat_of_key(session_key(42)) == 42
    assert chat_of_key(session_key(-1001234)) == -1001234
    assert chat_of_key("agent:web:per-peer:42") is None
    assert chat_of_key("agent:telegram:per-peer:abc") is None
    assert chat_of_key("") is None
