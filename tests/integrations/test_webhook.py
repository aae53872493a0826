"""The webhook: the secret, bad bodies, redelivered updates, and updates the bot does not read
(edits, stickers, groups) — never a 500."""

from __future__ import annotations

import logging

import pytest

from integrations.models import TelegramChat, TelegramUpdate
from integrations.telegram.inbox import updates_prune
from integrations.telegram.links import link_code_consume, link_code_create
from integrations.telegram.updates import (
    DEACTIVATED,
    PRIVATE_ONLY,
    TEXT_ONLY,
    update_handle,
)
from tests.integrations.conftest import WEBHOOK_SECRET
from tests.integrations.updates import CHAT, WEBHOOK, message, post, said

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def linked(alice):
    return link_code_consume(code=link_code_create(user=alice).code, chat_id=CHAT, title="a")


@pytest.mark.parametrize("secret", [None, "", "wrong", "s3cret-tesT"])
def test_a_wrong_or_missing_secret_is_403_and_nothing_is_stored(client, telegram, secret):
    response = post(client, message("hi"), secret=secret)
    assert response.status_code == 403
    assert not TelegramUpdate.objects.exists()
    assert telegram.calls == []


def test_an_empty_configured_secret_refuses_every_update(client, telegram, settings):
    settings.TELEGRAM_WEBHOOK_SECRET = ""
    assert post(client, message("hi"), secret="").status_code == 403
    assert not TelegramUpdate.objects.exists()


def test_the_bridge_off_is_404(client, settings):
    settings.TELEGRAM_BOT_TOKEN = ""
    settings.TELEGRAM_WEBHOOK_SECRET = WEBHOOK_SECRET
    assert post(client, message("hi")).status_code == 404
    assert not TelegramUpdate.objects.exists()


def test_get_is_405(client, telegram):
    assert client.get(WEBHOOK).status_code == 405


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"\xff\xfe",
        b"[1, 2]",
        b'"text"',
        b"{}",
        b'{"update_id": "7"}',
        b'{"update_id": true}',
        b'{"update_id": 1.5}',
        b'{"update_id": -1}',
        b'{"update_id": 99999999999999999999999}',
        # What no database stores or nests without end: 400, never a 500 when stored.
        b'{"update_id": 1, "message": {"text": "a\\u0000b"}}',
        b'{"update_id": 1, "message": {"text": "\\ud800"}}',
        b'{"update_id": 1, "x": NaN}',
        b'{"update_id": 1, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"update_id": 1, "x": ' + b"[" * 40 + b"]" * 40 + b"}",
    ],
    ids=lambda raw: repr(raw[:40]),
)
def test_a_malformed_body_is_400_with_a_short_error_and_nothing_stored(client, telegram, raw):
    response = post(client, None, raw=raw)
    assert response.status_code == 400
    assert response.json()["error"]
    assert not TelegramUpdate.objects.exists()


def test_a_body_over_a_mebibyte_is_413(client, telegram):
    raw = b'{"update_id": 1, "x": "' + b"a" * (1024 * 1024) + b'"}'
    assert post(client, None, raw=raw).status_code == 413
    assert not TelegramUpdate.objects.exists()


def test_a_redelivered_update_is_handled_once(client, telegram, inline_turns):
    update = message("hello", update_id=77)
    assert post(client, update).status_code == 200
    assert post(client, update).status_code == 200
    assert TelegramUpdate.objects.get().handled_at is not None
    assert len(said(telegram)) == 1  # how to link, once
    update_handle(update_id=77)  # a redelivered task
    assert len(said(telegram)) == 1


@pytest.mark.parametrize(
    "update",
    [
        message("edited", kind="edited_message"),
        message("post", kind="channel_post", chat_type="channel"),
        {"update_id": 5, "callback_query": {"id": "1"}},
        {"update_id": 6, "message": "not an object"},
        {"update_id": 7, "message": {"chat": {"id": "x"}}},
        message("hello", chat_type="group"),
        message(None, sticker={"file_id": "s"}, chat_type="supergroup"),
    ],
)
def test_updates_the_bot_does_not_read_are_200_and_say_nothing(
    client, telegram, inline_turns, linked, update
):
    assert post(client, update).status_code == 200
    assert telegram.calls == []


def test_a_command_in_a_group_says_the_bot_works_in_private_chats(
    client, telegram, inline_turns, linked
):
    post(client, message("/help@rollback_test_bot", chat_type="group"))
    assert said(telegram) == [PRIVATE_ONLY]


@pytest.mark.parametrize(
    "extra",
    [{"sticker": {"file_id": "s"}}, {"photo": [{"file_id": "p"}]}, {"voice": {"file_id": "v"}}],
)
def test_a_message_without_text_gets_a_short_note(client, telegram, inline_turns, linked, extra):
    assert post(client, message(None, **extra)).status_code == 200
    assert said(telegram) == [TEXT_ONLY]


def test_a_deactivated_users_chat_is_told_so_and_nothing_else(
    client, telegram, inline_turns, linked, alice
):
    from sessions_app.models import Session

    alice.is_active = False
    alice.save()
    post(client, message("hello"))
    post(client, message("/list"))
    assert said(telegram) == [DEACTIVATED, DEACTIVATED]
    assert not Session.objects.exists()


def test_telegram_refusing_an_answer_is_logged_not_a_500(client, telegram, inline_turns, caplog):
    telegram.fail("sendMessage", status=400, description="Bad Request: chat not found", times=5)
    with caplog.at_level(logging.WARNING, logger="integrations.telegram"):
        assert post(client, message("hello")).status_code == 200
    assert TelegramUpdate.objects.get().handled_at is not None
    logged = [r for r in caplog.records if r.name == "integrations.telegram.updates"]
    assert [(r.levelname, r.getMessage()) for r in logged] == [
        ("WARNING", f"telegram: could not answer chat {CHAT}")
    ]
    assert logged[0].exc_info is not None
    assert str(logged[0].exc_info[1]) == "sendMessage: Chat not found"


def test_old_updates_are_pruned(client, telegram):
    from datetime import timedelta

    from django.utils import timezone

    TelegramUpdate.objects.create(update_id=1, received_at=timezone.now() - timedelta(days=4))
    TelegramUpdate.objects.create(update_id=2)
    assert updates_prune() == 1
    assert list(TelegramUpdate.objects.values_list("pk", flat=True)) == [2]
    assert TelegramChat.objects.count() == 0
