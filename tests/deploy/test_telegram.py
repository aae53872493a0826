"""The Telegram bridge deployed: daphne and a Celery worker (prefork: the pool child runs the
turn and relays it) on PostgreSQL and Redis, the stand-in for Telegram's Bot API and the fake
model as servers. A chat is linked with a code from the API and `/start CODE` through the
webhook; a text message becomes a turn whose reply streams into the chat as edits, then shows
rendered; a turn posted through the API into that conversation shows in the chat too; a tool
call waiting for approval is approved from the chat; a redelivered update is handled once; a
wrong secret is refused.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import httpx
import pytest

from integrations.telegram.format import render
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.fakes.telegram_server import FakeTelegram

from .conftest import Client, Stack, deploy_env, running

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

SECRET = "deploy-s3cret"  # noqa: S105 (a test value)
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 (a header name)
WRONG_SECRET = "wrong"  # noqa: S105 (a test value)
WEBHOOK = "/integrations/telegram/webhook/"
CHAT = 880011
OTHER_CHAT = 880012  # a chat linked to no one
_ids = itertools.count(5000)
ASKS = "Send /approve or /refuse."  # the relay's note under a reply that waits for approval


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


@pytest.fixture(scope="module")
def stack(model_server, telegram, database, fresh_redis, tmp_path_factory) -> Iterator[Stack]:
    env = deploy_env(
        tmp_path_factory.mktemp("telegram-var"),
        model_server.base_url,
        database.url,
        TELEGRAM_BOT_TOKEN=telegram.token,
        TELEGRAM_WEBHOOK_SECRET=SECRET,
        TELEGRAM_API_URL=telegram.url,
        AGENT_TOOLS="tests.agents.approval_tools.send_email",
    )
    with running(tmp_path_factory, "telegram", env) as stack:
        stack.web("web")
        stack.worker("worker", pool="prefork")
        yield stack


@pytest.fixture(scope="module")
def linked(stack, telegram) -> Iterator[Client]:
    """A user of the stack, their chat CHAT linked: a code from the API, then `/start CODE`
    through the webhook."""
    api = Client(stack.urls["web"], stack.api_key("phone"))
    code = api.post("/telegram/link/")["code"]
    assert post(stack, message(f"/start {code}")).status_code == 200
    telegram.wait_for(lambda calls: any("Linked" in text for text in said(telegram)))
    yield api
    api.close()


def message(text: str, *, update_id: int | None = None) -> dict:
    return {
        "update_id": update_id if update_id is not None else next(_ids),
        "message": {
            "message_id": next(_ids),
            "date": int(time.time()),
            "chat": {"id": CHAT, "type": "private", "first_name": "Pat"},
            "from": {"id": CHAT, "is_bot": False, "first_name": "Pat"},
            "text": text,
        },
    }


def post(stack: Stack, update: dict, *, secret: str = SECRET) -> httpx.Response:
    return httpx.post(
        stack.urls["web"] + WEBHOOK, json=update, headers={SECRET_HEADER: secret}, timeout=30
    )


def said(telegram: FakeTelegram) -> list[str]:
    return [c.params["text"] for c in telegram.sent("sendMessage", chat_id=CHAT)]


def test_a_message_from_a_linked_chat_streams_its_reply_as_edits_then_rendered(
    stack, linked, telegram, model_server, database
):
    model_server.reset()
    reply = "**Deployed** and streaming: " + " ".join(f"token{i}" for i in range(30))
    model_server.queue(Reply(reply, delay=0.1))
    before = len(telegram.calls)
    update = message("hello from my phone")
    assert post(stack, update).status_code == 200
    assert post(stack, update).status_code == 200  # Telegram redelivers: handled once

    expected = render(reply)
    telegram.wait_for(
        lambda calls: [m["text"] for m in telegram.messages(CHAT)][-1:] == [expected[0].text],
        timeout=40,
    )
    shown = [
        c
        for c in telegram.calls[before:]
        if c.method in ("sendMessage", "editMessageText") and c.params.get("chat_id") == CHAT
    ]
    assert [c.method for c in shown].count("sendMessage") == 1
    assert [c.method for c in shown].count("editMessageText") >= 2
    times = [c.at for c in shown]
    assert min(b - a for a, b in itertools.pairwise(times)) >= 0.9
    assert all(reply.startswith(c.params["text"]) for c in shown[:-1])  # plain while streaming
    assert shown[-1].params["entities"] == expected[0].entity_dicts()
    assert any(c.method == "sendChatAction" for c in telegram.calls[before:])

    rows = database.query(
        "SELECT t.status, r.message_ids, r.delivered_at IS NOT NULL "
        "FROM sessions_app_turn t JOIN integrations_telegramreply r ON r.turn_id = t.id "
        "JOIN sessions_app_externalsession s ON s.id = t.session_id WHERE s.session_key = %s",
        f"agent:telegram:per-peer:{CHAT}",
    )
    assert len(rows) == 1  # the redelivered update made no second turn
    status, message_ids, delivered = rows[0]
    assert status == "done"
    assert delivered
    assert message_ids == [m["message_id"] for m in telegram.messages(CHAT)][-1:]
    assert len(model_server.requests) == 1


def test_a_turn_posted_through_the_api_into_the_chats_conversation_shows_in_the_chat(
    stack, linked, telegram, model_server, database
):
    """The other direction: the worker that runs a turn typed outside Telegram into the linked
    chat's conversation shows the chat the message, then its reply."""
    model_server.reset()
    reply = "Answered *in* both places."
    model_server.queue(Reply(reply, delay=0.05))
    before = len(telegram.calls)
    turn = linked.post(
        "/chat/",
        {"session_key": f"agent:telegram:per-peer:{CHAT}", "message": "typed at my desk"},
        expect=202,
    )
    expected = render(reply)
    telegram.wait_for(
        lambda calls: [m["text"] for m in telegram.messages(CHAT)][-1:] == [expected[0].text],
        timeout=40,
    )
    sent = [c.params["text"] for c in telegram.sent("sendMessage", chat_id=CHAT)[-2:]]
    assert sent[0] == "🖥 You, in Rollback:\ntyped at my desk"
    assert len([c for c in telegram.calls[before:] if c.method == "sendMessage"]) == 2
    rows = database.query(
        "SELECT chat_id, delivered_at IS NOT NULL FROM integrations_telegramreply "
        "WHERE turn_id = %s",
        turn["id"],
    )
    assert rows == [(CHAT, True)]


def test_a_tool_call_waiting_for_approval_is_approved_from_the_chat(
    stack, linked, telegram, model_server, database
):
    """The worker (one process: concurrency 1) holds the turn that waits; `/approve` is answered
    in the webhook's request, so it does not queue behind it, and the tool runs."""
    model_server.reset()
    mail = {"to": "bob@example.com", "subject": "hi"}
    model_server.queue(ToolCalls([ToolCall("send_email", mail, id="call_tg")]), Reply("Mailed."))
    assert post(stack, message("mail bob")).status_code == 200
    telegram.wait_for(lambda calls: any(ASKS in text for text in telegram.texts(CHAT)), timeout=40)
    assert post(stack, message("/approve")).status_code == 200
    assert "Approved: send_email runs now." in said(telegram)
    telegram.wait_for(lambda calls: "Mailed." in telegram.texts(CHAT), timeout=40)
    [(content,)] = database.query(
        "SELECT m.content FROM sessions_app_message m WHERE m.role = 'tool' "
        "ORDER BY m.id DESC LIMIT 1"
    )
    assert "sent to bob@example.com" in content


def test_a_wrong_or_missing_secret_is_refused_and_nothing_is_stored(stack, telegram, database):
    update = message("not from Telegram")
    before = len(telegram.calls)
    assert post(stack, update, secret=WRONG_SECRET).status_code == 403
    response = httpx.post(stack.urls["web"] + WEBHOOK, json=update, timeout=30)
    assert response.status_code == 403
    stored = database.query(
        "SELECT count(*) FROM integrations_telegramupdate WHERE update_id = %s",
        update["update_id"],
    )
    assert stored == [(0,)]
    # Nor does it answer later: an update accepted after it, from another chat, goes the same
    # way (stored, then handled by a worker) and is answered, and nothing came to CHAT meanwhile.
    after = message("after the refused ones")
    after["message"]["chat"]["id"] = after["message"]["from"]["id"] = OTHER_CHAT
    assert post(stack, after).status_code == 200
    telegram.wait_for(lambda calls: any(c.params.get("chat_id") == OTHER_CHAT for c in calls), 60)
    # An answer to the refused update would be a new message to CHAT; a late edit of a reply the
    # earlier tests sent (its last words, delayed on a loaded machine) is not one.
    earlier = {c.params.get("message_id") for c in telegram.calls[:before]} - {None}
    answers = [
        c
        for c in telegram.calls[before:]
        if c.params.get("chat_id") != OTHER_CHAT
        and not (c.method == "editMessageText" and c.params.get("message_id") in earlier)
    ]
    assert answers == []
