"""The stand-in for Telegram's Bot API answers as Telegram does, over real HTTP."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.fakes.telegram_server import FakeTelegram

WRONG_TOKEN = "1:wrong"  # noqa: S105 (a test value)


@pytest.fixture
def telegram():
    with FakeTelegram() as server:
        yield server


def call(telegram: FakeTelegram, method: str, token: str | None = None, **kwargs) -> httpx.Response:
    return httpx.post(f"{telegram.url}/bot{token or telegram.token}/{method}", **kwargs)


def test_a_wrong_token_is_401_and_an_unknown_method_404(telegram):
    answer = call(telegram, "getMe", token=WRONG_TOKEN)
    assert (answer.status_code, answer.json()) == (
        401,
        {"ok": False, "error_code": 401, "description": "Unauthorized"},
    )
    assert call(telegram, "noSuchMethod").status_code == 404
    assert telegram.calls[0].method == "noSuchMethod"  # only the right token's calls count


def test_form_and_json_bodies_are_decoded_and_messages_numbered(telegram):
    entities = [{"type": "bold", "offset": 0, "length": 2}]
    first = call(
        telegram,
        "sendMessage",
        data={"chat_id": "7", "text": "[1]", "entities": json.dumps(entities)},
    ).json()["result"]
    second = call(telegram, "sendMessage", json={"chat_id": 7, "text": "hi"}).json()["result"]
    assert (first["message_id"], second["message_id"]) == (1, 2)
    assert first["chat"] == {"id": 7, "type": "private"}
    assert first["text"] == "[1]"  # text stays a string even when it looks like JSON
    assert telegram.sent("sendMessage", chat_id=7)[0].params["entities"] == entities
    assert telegram.texts(7) == ["[1]", "hi"]


def test_edits_that_change_nothing_and_texts_too_long_are_400(telegram):
    call(telegram, "sendMessage", json={"chat_id": 7, "text": "same"})
    same = call(telegram, "editMessageText", json={"chat_id": 7, "message_id": 1, "text": "same"})
    assert same.status_code == 400
    assert "message is not modified" in same.json()["description"]
    long = call(telegram, "sendMessage", json={"chat_id": 7, "text": "😀" * 2049})  # 4,098 units
    assert long.json()["description"] == "Bad Request: message is too long"
    gone = call(telegram, "editMessageText", json={"chat_id": 8, "message_id": 1, "text": "x"})
    assert gone.json()["description"] == "Bad Request: message to edit not found"


def test_refuse_answers_429_with_retry_after_the_given_times(telegram):
    telegram.refuse("sendMessage", retry_after=3, times=2)
    answers = [call(telegram, "sendMessage", json={"chat_id": 7, "text": "x"}) for _ in range(3)]
    assert [a.status_code for a in answers] == [429, 429, 200]
    assert answers[0].json() == {
        "ok": False,
        "error_code": 429,
        "description": "Too Many Requests: retry after 3",
        "parameters": {"retry_after": 3},
    }
    assert len(telegram.sent("sendMessage")) == 1
