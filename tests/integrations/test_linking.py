"""Linking a Telegram chat to a user with a one-time code: made on the profile page or by the
API, sent as `/start CODE`."""

from __future__ import annotations

import hashlib
import string
import threading
from datetime import timedelta

import pytest
from django.db import close_old_connections, connection
from django.utils import timezone

from integrations.models import TelegramChat, TelegramLinkCode
from integrations.telegram.errors import (
    BridgeOff,
    ChatNotFound,
    LinkCodeExpired,
    LinkCodeUnknown,
    LinkCodeUsed,
    UserDeactivated,
)
from integrations.telegram.links import (
    ALPHABET,
    chat_unlink,
    code_hash,
    link_code_consume,
    link_code_create,
)
from tests.integrations.updates import CHAT, message, post, said

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def bridge_on(settings):
    """Codes are made only while the bridge is on (the tests that talk to the bot have the
    stand-in's token through the `telegram` fixture, which wins)."""
    settings.TELEGRAM_BOT_TOKEN = "123:test-token"  # noqa: S105 (a test value)


def test_a_code_is_eight_unambiguous_characters_stored_only_as_its_hash(alice):
    made = link_code_create(user=alice)
    assert len(made.code) == 8
    # Capital letters and digits, none that reads as another (0/O, 1/I/L).
    assert set(made.code) <= set(ALPHABET) <= set(string.ascii_uppercase + string.digits)
    assert not set(ALPHABET) & set("0O1IL")
    row = TelegramLinkCode.objects.get(user=alice)
    # Its SHA-256 (computed here, not by the code under test), and nothing else of it.
    assert row.code_hash == hashlib.sha256(made.code.encode()).hexdigest()
    assert made.code not in row.code_hash
    # A code typed in lower case, with spaces or a dash, is the same code.
    assert code_hash(f" {made.code[:4].lower()}-{made.code[4:]} ") == row.code_hash
    left = made.expires_at - timezone.now()
    assert timedelta(minutes=9) < left <= timedelta(minutes=10)


def test_consuming_a_code_links_the_chat_to_its_user_once(alice):
    made = link_code_create(user=alice)
    chat = link_code_consume(code=made.code.lower(), chat_id=CHAT, title="@alice_tg")
    assert (chat.user, chat.chat_id, chat.title) == (alice, CHAT, "@alice_tg")
    with pytest.raises(LinkCodeUsed):
        link_code_consume(code=made.code, chat_id=CHAT + 1, title="")
    assert TelegramChat.objects.count() == 1


def test_an_unknown_code_is_refused(alice):
    with pytest.raises(LinkCodeUnknown):
        link_code_consume(code="ABCDEFGH", chat_id=CHAT, title="")
    assert not TelegramChat.objects.exists()


def test_an_expired_code_is_refused(alice):
    made = link_code_create(user=alice)
    TelegramLinkCode.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(LinkCodeExpired):
        link_code_consume(code=made.code, chat_id=CHAT, title="")
    assert not TelegramChat.objects.exists()


def test_a_new_code_retires_the_users_earlier_ones(alice):
    first = link_code_create(user=alice)
    second = link_code_create(user=alice)
    with pytest.raises(LinkCodeUsed):
        link_code_consume(code=first.code, chat_id=CHAT, title="")
    assert link_code_consume(code=second.code, chat_id=CHAT, title="").user == alice


def test_no_code_is_made_while_the_bridge_is_off(alice, settings):
    settings.TELEGRAM_BOT_TOKEN = ""
    with pytest.raises(BridgeOff):
        link_code_create(user=alice)
    assert not TelegramLinkCode.objects.exists()


def test_a_deactivated_user_can_neither_make_nor_use_a_code(alice):
    made = link_code_create(user=alice)
    alice.is_active = False
    alice.save()
    with pytest.raises(UserDeactivated):
        link_code_create(user=alice)
    with pytest.raises(UserDeactivated):
        link_code_consume(code=made.code, chat_id=CHAT, title="")


def test_relinking_moves_the_chat_to_the_new_codes_user(alice, bob):
    link_code_consume(code=link_code_create(user=alice).code, chat_id=CHAT, title="a")
    chat = link_code_consume(code=link_code_create(user=bob).code, chat_id=CHAT, title="b")
    assert chat.user == bob
    assert TelegramChat.objects.get(chat_id=CHAT).user == bob


def test_unlinking_another_users_chat_is_not_found(alice, bob):
    chat = link_code_consume(code=link_code_create(user=alice).code, chat_id=CHAT, title="")
    with pytest.raises(ChatNotFound):
        chat_unlink(user=bob, chat_pk=chat.pk)
    chat_unlink(user=alice, chat_pk=chat.pk)
    assert not TelegramChat.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_starts_with_one_code_at_once_link_one_chat(alice):
    code = link_code_create(user=alice).code
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def consume(chat_id: int) -> None:
        close_old_connections()
        try:
            barrier.wait()
            link_code_consume(code=code, chat_id=chat_id, title="")
            outcomes.append("linked")
        except LinkCodeUsed:
            outcomes.append("used")
        finally:
            connection.close()

    threads = [threading.Thread(target=consume, args=(CHAT + i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["linked", "used"]
    assert TelegramChat.objects.count() == 1


# --- through the webhook ---------------------------------------------------------------------

webhook = pytest.mark.django_db(transaction=True)


@webhook
def test_start_code_links_the_chat_and_says_as_whom(client, telegram, inline_turns, alice):
    code = link_code_create(user=alice).code
    assert post(client, message(f"/start {code}")).status_code == 200
    assert TelegramChat.objects.get(chat_id=CHAT).user == alice
    [answer] = said(telegram)
    assert "Linked to Rollback as alice" in answer
    assert "/checkpoint NAME" in answer


@webhook
def test_start_with_an_expired_code_says_so(client, telegram, inline_turns, alice):
    code = link_code_create(user=alice).code
    TelegramLinkCode.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    post(client, message(f"/start {code}"))
    assert not TelegramChat.objects.exists()
    assert said(telegram) == [LinkCodeExpired().message]


@webhook
def test_start_with_a_used_or_unknown_code_says_so(client, telegram, inline_turns, alice):
    code = link_code_create(user=alice).code
    post(client, message(f"/start {code}", chat_id=1))
    post(client, message(f"/start {code}"))
    post(client, message("/start NOPE2345"))
    assert said(telegram) == [LinkCodeUsed().message, LinkCodeUnknown().message]
    assert list(TelegramChat.objects.values_list("chat_id", flat=True)) == [1]


@webhook
def test_an_unlinked_chat_gets_one_message_on_how_to_link_and_nothing_else(
    client, telegram, inline_turns, alice
):
    from sessions_app.models import Session

    for text in ("hello", "/list", "/start"):
        post(client, message(text))
    answers = said(telegram)
    assert len(answers) == 3
    assert all("not linked" in a and "/start CODE" in a for a in answers)
    assert not Session.objects.exists()
    assert telegram.sent("sendChatAction") == []
