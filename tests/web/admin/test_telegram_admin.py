"""The admin's linked Telegram chats: listed with their user, searchable by username."""

from __future__ import annotations

import pytest

from integrations.models import TelegramChat

pytestmark = pytest.mark.django_db
LIST = "/admin/integrations/telegramchat/"


def test_linked_chats_are_listed_and_searched_by_user(client, admin_user, alice, bob):
    TelegramChat.objects.create(chat_id=111, user=alice, title="@alice_tg")
    TelegramChat.objects.create(chat_id=222, user=bob, title="@bob_tg")
    client.force_login(admin_user)
    page = client.get(LIST).content.decode()
    assert "@alice_tg" in page
    assert "@bob_tg" in page
    found = client.get(LIST, {"q": "bob"}).content.decode()
    assert "@bob_tg" in found
    assert "@alice_tg" not in found


def test_chats_are_not_added_in_the_admin(client, admin_user):
    client.force_login(admin_user)
    assert client.get(LIST + "add/").status_code == 403
