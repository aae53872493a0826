"""Text from a linked chat is a turn of the user's session of key
`agent:telegram:per-peer:<chat_id>`, with the TelegramReply row the relay follows."""

from __future__ import annotations

import pytest

from integrations.models import TelegramReply
from integrations.telegram.conversations import session_key
from integrations.telegram.links import link_code_consume, link_code_create
from integrations.telegram.updates import AWAITING_APPROVAL, STILL_WRITING, update_handle
from sessions_app.models import Session, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import session_for_key
from sessions_app.turns import turn_start
from tests.fakes.chat_server import Reply
from tests.integrations.updates import CHAT, message, post, said

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def linked(alice):
    return link_code_consume(code=link_code_create(user=alice).code, chat_id=CHAT, title="a")


def test_a_text_makes_the_keyed_session_and_a_turn_with_its_telegram_reply(
    client, telegram, fake_llm, inline_turns, linked, alice
):
    fake_llm.queue(Reply("Hello from the agent."))
    assert post(client, message("hello agent", update_id=501)).status_code == 200
    session = Session.objects.get(owner=alice)
    assert session.session_key == "agent:telegram:per-peer:424242" == session_key(CHAT)
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.DONE
    assert turn.idempotency_key == "telegram-update:501"
    assert [(m.role, m.content) for m in branch_history(current_branch(session))] == [
        ("user", "hello agent"),
        ("assistant", "Hello from the agent."),
    ]
    assert TelegramReply.objects.get(turn=turn).chat_id == CHAT
    assert telegram.sent("sendChatAction", chat_id=CHAT)[0].params["action"] == "typing"
    # The relay delivers the reply into the chat.
    telegram.wait_for(lambda _: "Hello from the agent." in telegram.texts(CHAT))


def test_the_same_update_handled_again_starts_no_second_turn(
    client, telegram, fake_llm, inline_turns, linked
):
    fake_llm.queue(Reply("Once."))
    post(client, message("hello", update_id=9))
    post(client, message("hello", update_id=9))
    update_handle(update_id=9)
    assert Turn.objects.count() == 1
    assert TelegramReply.objects.count() == 1


def test_a_text_while_a_turn_runs_is_told_to_wait(client, telegram, inline_turns, linked, alice):
    session = session_for_key(owner=alice, session_key=session_key(CHAT))
    turn_start(session=session, message="earlier")  # queued, never run here
    post(client, message("hello"))
    assert said(telegram) == [STILL_WRITING]
    assert Turn.objects.count() == 1
    assert not TelegramReply.objects.exists()


def test_a_text_while_a_turn_awaits_approval_says_how_to_answer(
    client, telegram, inline_turns, linked, alice
):
    session = session_for_key(owner=alice, session_key=session_key(CHAT))
    turn = turn_start(session=session, message="earlier")
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.AWAITING_APPROVAL)
    post(client, message("hello"))
    assert said(telegram) == [AWAITING_APPROVAL]


def test_a_message_over_the_limit_gets_the_validation_message(
    client, telegram, inline_turns, linked, settings
):
    settings.AGENT_MAX_INPUT_CHARS = 10
    post(client, message("x" * 11))
    assert said(telegram) == ["The message is 11 characters long; the limit is 10."]
    assert not Turn.objects.exists()
    assert not TelegramReply.objects.exists()


def test_the_session_is_the_users_own_and_another_users_chat_has_its_own(
    client, telegram, fake_llm, inline_turns, linked, alice, bob
):
    link_code_consume(code=link_code_create(user=bob).code, chat_id=CHAT + 1, title="b")
    fake_llm.queue(Reply("A."), Reply("B."))
    post(client, message("from alice"))
    post(client, message("from bob", chat_id=CHAT + 1))
    assert Session.objects.get(owner=alice).session_key == session_key(CHAT)
    assert Session.objects.get(owner=bob).session_key == session_key(CHAT + 1)
