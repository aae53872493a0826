"""The profile's Telegram section: a link code with the message to send, the linked chats and
Unlink; another user's chat is a 404."""

from __future__ import annotations

import re

import pytest

from integrations.models import TelegramChat, TelegramLinkCode
from integrations.telegram.links import code_hash, link_code_consume, link_code_create

pytestmark = pytest.mark.django_db
PROFILE = "/accounts/profile/"
LINK = "/accounts/profile/telegram/link/"


@pytest.fixture
def bridge_on(settings):
    settings.TELEGRAM_BOT_TOKEN = "123:test-token"  # noqa: S105 (a test value)


@pytest.fixture
def alices_chat(alice, bridge_on):
    return link_code_consume(code=link_code_create(user=alice).code, chat_id=777, title="@al")


def test_the_section_says_when_the_bridge_is_off(client, alice):
    client.force_login(alice)
    page = client.get(PROFILE).content.decode()
    assert 'data-testid="telegram-off"' in page
    assert 'data-testid="telegram-link"' not in page
    response = client.post(LINK)
    assert response.status_code == 404
    assert not TelegramLinkCode.objects.exists()


def test_linking_shows_the_code_and_the_exact_message_to_send(client, alice, bridge_on):
    client.force_login(alice)
    page = client.get(PROFILE).content.decode()
    assert 'data-testid="no-telegram-chats"' in page
    assert f'action="{LINK}"' in page
    response = client.post(LINK)
    assert response.status_code == 200
    assert response["Cache-Control"].startswith("max-age=0")
    page = response.content.decode()
    [code] = re.findall(r'data-testid="telegram-start">/start ([A-Z0-9]{8})</code>', page)
    assert TelegramLinkCode.objects.get(user=alice, used_at=None).code_hash == code_hash(code)


def test_with_the_bots_username_the_code_comes_with_a_link_into_its_chat(
    client, alice, bridge_on, settings
):
    client.force_login(alice)
    page = client.post(LINK).content.decode()
    assert 'data-testid="telegram-open"' not in page  # no username set: no link
    settings.TELEGRAM_BOT_USERNAME = "rollback_test_bot"
    page = client.post(LINK).content.decode()
    [code] = re.findall(r'data-testid="telegram-start">/start ([A-Z0-9]{8})</code>', page)
    assert f'href="https://t.me/rollback_test_bot?start={code}"' in page
    assert "Open @rollback_test_bot in Telegram" in page
    assert 'rel="noopener noreferrer"' in page


def test_linked_chats_are_listed_with_unlink(client, alice, alices_chat, bridge_on):
    client.force_login(alice)
    page = client.get(PROFILE).content.decode()
    assert "@al" in page
    assert "<code>777</code>" in page
    assert f"/accounts/profile/telegram/{alices_chat.pk}/unlink/" in page
    assert "data-confirm=" in page
    response = client.post(f"/accounts/profile/telegram/{alices_chat.pk}/unlink/")
    assert response.status_code == 303
    assert response["Location"] == "/accounts/profile/#telegram"
    assert not TelegramChat.objects.exists()


def test_bob_cannot_unlink_or_see_alices_chat(client, bob, alices_chat, bridge_on):
    client.force_login(bob)
    page = client.get(PROFILE).content.decode()
    assert "@al" not in page
    response = client.post(f"/accounts/profile/telegram/{alices_chat.pk}/unlink/")
    assert response.status_code == 404
    assert TelegramChat.objects.filter(pk=alices_chat.pk).exists()


def test_unlink_needs_a_post_and_a_login(client, alice, alices_chat, bridge_on):
    url = f"/accounts/profile/telegram/{alices_chat.pk}/unlink/"
    assert client.post(url).status_code == 302  # to log in
    client.force_login(alice)
    assert client.get(url).status_code == 405
    assert TelegramChat.objects.exists()
