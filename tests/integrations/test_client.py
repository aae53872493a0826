"""The Telegram client (python-telegram-bot) against the stand-in for Telegram's Bot API."""

from __future__ import annotations

import logging
import threading

import pytest

from integrations.telegram import client
from integrations.telegram.format import Piece, split_plain

CHAT = 4242
SECRET = "s3"  # noqa: S105 (a test value)
WRONG_TOKEN = "123:not-the-token"  # noqa: S105 (a test value)


def test_send_text_sends_one_message_and_returns_its_id(telegram):
    ids = client.send_text(CHAT, "Hello [there](javascript:x)")
    [call] = telegram.sent("sendMessage")
    assert call.params["chat_id"] == CHAT
    assert call.params["text"] == "Hello [there](javascript:x)"  # plain: as it is
    assert "entities" not in call.params
    assert ids == [1]
    assert telegram.texts(CHAT) == ["Hello [there](javascript:x)"]


def test_send_text_with_markdown_sends_text_and_entities(telegram):
    client.send_text(CHAT, "**Done**: see [x](https://example.com)", markdown=True)
    [call] = telegram.sent("sendMessage")
    assert call.params["text"] == "Done: see x"
    assert call.params["entities"] == [
        {"type": "bold", "offset": 0, "length": 4},
        {"type": "text_link", "offset": 10, "length": 1, "url": "https://example.com"},
    ]
    assert "parse_mode" not in call.params


def test_a_long_text_is_sent_as_several_messages_in_order(telegram):
    text = "\n".join(f"line {i:05d} " + "x" * 80 for i in range(100))
    ids = client.send_text(CHAT, text)
    assert len(ids) == 3
    assert ids == sorted(ids)
    assert "".join(telegram.texts(CHAT)) == text


def test_edits_show_the_new_text_and_an_unchanged_edit_is_fine(telegram):
    [message_id] = client.send_text(CHAT, "draft")
    client.edit_piece(CHAT, message_id, Piece("final"))
    client.edit_piece(CHAT, message_id, Piece("final"))  # Telegram: "message is not modified"
    assert telegram.texts(CHAT) == ["final"]
    statuses = [c.status for c in telegram.calls if c.method == "editMessageText"]
    assert statuses == [200, 400]


def test_deleting_a_message_removes_it_and_deleting_it_again_is_fine(telegram):
    first, second = (client.send_text(CHAT, t)[0] for t in ("one", "two"))
    client.delete_message(CHAT, second)
    client.delete_message(CHAT, second)
    assert telegram.texts(CHAT) == ["one"]
    assert first < second


def test_send_typing_sends_the_typing_action_and_never_raises(telegram):
    client.send_typing(CHAT)
    assert [c.params for c in telegram.sent("sendChatAction")] == [
        {"chat_id": CHAT, "action": "typing"}
    ]
    telegram.fail(
        "sendChatAction", status=403, description="Forbidden: bot was blocked by the user"
    )
    client.send_typing(CHAT)  # no exception
    telegram.stop()
    client.send_typing(CHAT)  # unreachable: no exception either


def test_a_429_is_waited_out_for_its_retry_after_then_sent(telegram):
    telegram.refuse("sendMessage", retry_after=1)
    assert client.send_text(CHAT, "after the wait") == [1]
    refused, accepted = (c for c in telegram.calls if c.method == "sendMessage")
    assert (refused.status, accepted.status) == (429, 200)
    assert accepted.at - refused.at >= 1.0
    assert telegram.texts(CHAT) == ["after the wait"]


def test_429s_beyond_the_bound_raise_telegram_error(telegram, monkeypatch):
    telegram.refuse("sendMessage", retry_after=1, times=10)
    with pytest.raises(client.TelegramError, match="rate limited"):
        client.send_text(CHAT, "never")
    assert len(telegram.calls) == client.MAX_TRIES
    assert telegram.texts(CHAT) == []


def test_a_429_is_raised_at_once_as_rate_limited_when_the_caller_asks(telegram):
    telegram.refuse("editMessageText", retry_after=7)
    [message_id] = client.send_text(CHAT, "a")
    with pytest.raises(client.RateLimited) as raised:
        client.edit_piece(CHAT, message_id, Piece("b"), wait=False)
    assert raised.value.retry_after == 7
    assert telegram.texts(CHAT) == ["a"]


def test_a_refusal_is_a_telegram_error_with_telegrams_reason(telegram):
    telegram.fail("sendMessage", status=403, description="Forbidden: bot was blocked by the user")
    with pytest.raises(client.TelegramError, match="blocked by the user"):
        client.send_text(CHAT, "hello")
    too_long = Piece("x" * 5000)  # past the client's split: Telegram's own 400
    with pytest.raises(client.TelegramError, match="too long"):
        client.send_piece(CHAT, too_long)


def test_an_unreachable_api_is_a_telegram_error_after_one_retry(telegram, settings):
    telegram.stop()
    with pytest.raises(client.TelegramError, match="unreachable"):
        client.send_text(CHAT, "hello")


def test_a_wrong_token_is_a_telegram_error(telegram, settings):
    settings.TELEGRAM_BOT_TOKEN = WRONG_TOKEN
    with pytest.raises(client.TelegramError) as raised:
        client.send_text(CHAT, "hello")
    assert "not-the-token" not in str(raised.value)
    assert telegram.calls == []


def test_the_bridge_off_sends_nothing(telegram, settings):
    settings.TELEGRAM_BOT_TOKEN = ""
    assert client.enabled() is False
    with pytest.raises(client.TelegramError, match="off"):
        client.send_text(CHAT, "hello")
    assert telegram.calls == []


def test_set_and_delete_webhook(telegram):
    client.set_webhook("https://rollback.example/integrations/telegram/webhook/", secret=SECRET)
    assert telegram.webhook["url"] == "https://rollback.example/integrations/telegram/webhook/"
    assert telegram.webhook["secret_token"] == SECRET
    client.delete_webhook()
    assert telegram.webhook == {}
    with pytest.raises(client.TelegramError, match=r"(?i)https url"):
        client.set_webhook("http://insecure.example/hook", secret=SECRET)


def test_calls_from_many_threads_share_one_loop_and_all_arrive(telegram):
    errors: list[BaseException] = []

    def send(i: int) -> None:
        try:
            client.send_text(CHAT + i, f"hello {i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert errors == []
    assert sorted(c.params["chat_id"] for c in telegram.sent("sendMessage")) == [
        CHAT + i for i in range(8)
    ]


def test_the_token_never_reaches_the_logs(telegram, caplog):
    with caplog.at_level(logging.DEBUG):
        client.send_text(CHAT, "hello")
        client.edit_piece(CHAT, 1, split_plain("again")[0])
    assert any("sendMessage" in r.getMessage() for r in caplog.records)
    assert all(telegram.token not in r.getMessage() for r in caplog.records)
