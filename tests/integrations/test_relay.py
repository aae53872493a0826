"""The relay: a turn started from Telegram streams into its chat, against the stand-in for
Telegram and the fake Chat Completions server, the turn running on the embedded mode's pool."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import F

from agents.dispatch import drain
from agents.services import chat_submit, recover_once
from integrations.models import TelegramReply
from integrations.telegram import client, relay
from integrations.telegram.format import render
from sessions_app.approvals import turn_approve
from sessions_app.models import Turn
from sessions_app.turns import turn_cancel
from tests.fakes.chat_server import Error, Reply, ToolCall, ToolCalls

pytestmark = pytest.mark.django_db(transaction=True)

CHAT = 5150
OTHER_CHAT = 6160
SHOWN = ("sendMessage", "editMessageText", "deleteMessage")


@pytest.fixture
def relayed(telegram, fake_llm, celery_eager):
    """The stand-in, the model, turns on this process's pool; at the end nothing left running."""
    yield telegram
    drain()
    assert relay.idle(15)


def start(user, chat_id: int, message: str = "hi") -> Turn:
    """A turn as the bridge starts one: the turn and its TelegramReply in one transaction."""
    with transaction.atomic():
        turn = chat_submit(
            owner=user, session_key=f"agent:telegram:per-peer:{chat_id}", message=message
        )
        TelegramReply.objects.create(turn=turn, chat_id=chat_id)
    return turn


def finish(*turns: Turn) -> None:
    """Wait for the turns to end and the relay to deliver them."""
    drain()
    assert relay.idle(15)
    for turn in turns:
        turn.refresh_from_db()
        assert not turn.is_active


def calls(telegram, chat_id: int):
    return [c for c in telegram.calls if c.method in SHOWN and c.params.get("chat_id") == chat_id]


def gaps(telegram, chat_id: int) -> list[float]:
    times = [c.at for c in calls(telegram, chat_id)]
    return [b - a for a, b in itertools.pairwise(times)]


def words(n: int, prefix: str = "word") -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def assert_final(telegram, chat_id: int, turn: Turn) -> None:
    """The chat shows the turn's stored reply, rendered (text and entities)."""
    pieces = render(turn.reply)
    shown = telegram.messages(chat_id)
    assert [m["text"] for m in shown] == [p.text for p in pieces]
    assert [m.get("entities", []) for m in shown] == [p.entity_dicts() for p in pieces]
    row = TelegramReply.objects.get(pk=turn.pk)
    assert row.message_ids == [m["message_id"] for m in shown]
    assert row.delivered_at is not None


def test_a_streamed_reply_is_edited_at_most_once_per_edit_interval_then_shown_rendered(
    relayed, fake_llm, alice, settings
):
    settings.TELEGRAM_EDIT_SECONDS = 0.3  # Telegram's 1 s, shortened
    reply = "**Streaming** works: " + words(30)
    fake_llm.queue(Reply(reply, delay=0.05))  # about 1.5 s of streaming
    turn = start(alice, CHAT)
    finish(turn)
    assert turn.reply == reply
    shown = calls(relayed, CHAT)
    assert [c.method for c in shown].count("sendMessage") == 1
    assert [c.method for c in shown].count("editMessageText") >= 3
    assert min(gaps(relayed, CHAT)) >= 0.3 * 0.9
    streamed = [c.params["text"] for c in shown[:-1]]
    assert all(reply.startswith(text) for text in streamed)  # plain text while it streams
    assert "entities" not in shown[0].params
    assert_final(relayed, CHAT, turn)
    assert relayed.texts(CHAT) == ["Streaming works: " + words(30)]
    assert shown[-1].params["entities"] == [{"type": "bold", "offset": 0, "length": 9}]


def test_a_reply_past_4096_characters_goes_on_in_a_second_message(relayed, fake_llm, alice):
    reply = "\n".join(f"line {i:03d} " + "y" * 90 for i in range(60))
    assert len(reply) > 4096
    fake_llm.queue(Reply(reply, chunk_size=12, delay=0.1))
    turn = start(alice, CHAT)
    finish(turn)
    assert len(relayed.sent("sendMessage", chat_id=CHAT)) == 2
    assert_final(relayed, CHAT, turn)
    assert "".join(relayed.texts(CHAT)) == reply


def test_a_failed_turn_shows_its_error_in_a_short_note(relayed, fake_llm, alice):
    fake_llm.queue(Error(status=400, message="the model refused this request"))
    turn = start(alice, CHAT)
    finish(turn)
    assert turn.status == "failed"
    [text] = relayed.texts(CHAT)
    assert text.startswith("⚠️ The reply failed:")
    assert len(text) < 400
    assert TelegramReply.objects.get(pk=turn.pk).delivered_at is not None


@pytest.mark.parametrize(
    "refusal",
    [
        "Bad Request: can't parse entities: unsupported start tag",
        "Bad Request: message to edit not found",
    ],
)
def test_a_final_reply_telegram_refuses_arrives_again_as_plain_text(
    relayed, fake_llm, alice, refusal
):
    """The formatted reply is refused (entities Telegram will not take, the streamed message
    deleted by the reader): it is sent again, plain, as a new message, and the streamed one goes."""
    for method in ("sendMessage", "editMessageText"):
        relayed.fail(method, description=refusal, times=5, with_entities=True)
    fake_llm.queue(Reply("**Bold** claim: " + words(20), delay=0.05))
    turn = start(alice, CHAT)
    finish(turn)
    [plain] = render(turn.reply)
    assert plain.entities
    shown = relayed.messages(CHAT)
    assert [m["text"] for m in shown] == [plain.text]
    assert "entities" not in shown[0]
    row = TelegramReply.objects.get(pk=turn.pk)
    assert row.message_ids == [shown[0]["message_id"]]
    assert row.delivered_at is not None


def test_a_429_on_an_edit_postpones_the_chat_and_the_final_reply_still_arrives(
    relayed, fake_llm, alice
):
    relayed.refuse("editMessageText", retry_after=2)
    reply = "Rate limited but " + words(30)
    fake_llm.queue(Reply(reply, delay=0.1))
    turn = start(alice, CHAT)
    finish(turn)
    edits = [c for c in relayed.calls if c.method == "editMessageText"]
    assert edits[0].status == 429
    assert edits[1].at - edits[0].at >= 2.0
    assert_final(relayed, CHAT, turn)


def test_two_chats_stream_at_the_same_time_each_at_its_own_pace(
    relayed, fake_llm, alice, bob, settings
):
    settings.TELEGRAM_EDIT_SECONDS = 0.3  # Telegram's 1 s, shortened
    fake_llm.queue(Reply(words(30, "one"), delay=0.05), Reply(words(30, "two"), delay=0.05))
    first = start(alice, CHAT)
    # The second starts once the first streams (two turns claimed at the same instant lock
    # SQLite's shared in-memory test database: the turns', not the relay's, writes).
    relayed.wait_for(lambda calls: any(c.method == "sendMessage" for c in calls))
    second = start(bob, OTHER_CHAT)
    finish(first, second)
    for chat_id, turn in ((CHAT, first), (OTHER_CHAT, second)):
        assert len(calls(relayed, chat_id)) >= 3
        assert min(gaps(relayed, chat_id)) >= 0.3 * 0.9
        assert_final(relayed, chat_id, turn)
    # Interleaved: the second chat was shown its reply while the first one's streamed.
    one, two = calls(relayed, CHAT), calls(relayed, OTHER_CHAT)
    assert two[0].at < one[-1].at
    assert one[0].at < two[-1].at
    assert {first.reply, second.reply} == {words(30, "one"), words(30, "two")}


def test_a_turn_without_a_telegram_reply_sends_nothing(relayed, fake_llm, alice):
    fake_llm.queue(Reply("not for Telegram " + words(10), delay=0.05))
    with transaction.atomic():
        turn = chat_submit(owner=alice, session_key="agent:web:per-peer:1", message="hi")
    finish(turn)
    assert turn.reply.startswith("not for Telegram")
    assert relayed.calls == []


def test_the_bridge_off_relays_nothing_even_for_a_turn_with_a_row(
    relayed, fake_llm, alice, settings
):
    settings.TELEGRAM_BOT_TOKEN = ""
    fake_llm.queue(Reply("quiet " + words(5)))
    turn = start(alice, CHAT)
    finish(turn)
    assert relayed.calls == []
    assert TelegramReply.objects.get(pk=turn.pk).delivered_at is None


APPROVAL_NOTE = "Send /approve or /refuse."


@pytest.fixture
def email_tool(settings):
    from tests.agents import approval_tools

    settings.AGENT_TOOLS = ["tests.agents.approval_tools.send_email"]
    approval_tools.SENT.clear()
    yield approval_tools.SENT
    approval_tools.SENT.clear()


def waiting_for_approval(relayed) -> None:
    relayed.wait_for(lambda _: any(APPROVAL_NOTE in text for text in relayed.texts(CHAT)))


def test_a_turn_waiting_for_approval_says_so_then_shows_the_reply(
    relayed, fake_llm, alice, email_tool
):
    fake_llm.queue(
        ToolCalls([ToolCall("send_email", {"to": "bob@example.com", "subject": "hi"}, id="c1")]),
        Reply("Mailed **Bob**."),
    )
    turn = start(alice, CHAT, "mail bob")
    waiting_for_approval(relayed)
    [text] = relayed.texts(CHAT)
    assert "send_email" in text
    turn_approve(turn=Turn.objects.get(pk=turn.pk), tool_call_id="c1", approved=True)
    finish(turn)
    assert email_tool == [("bob@example.com", "hi")]
    assert_final(relayed, CHAT, turn)
    assert relayed.texts(CHAT) == ["Mailed Bob."]


def test_a_cancelled_turn_says_stopped(relayed, fake_llm, alice, email_tool):
    fake_llm.queue(
        ToolCalls([ToolCall("send_email", {"to": "bob@example.com", "subject": "hi"}, id="c1")]),
    )
    turn = start(alice, CHAT, "mail bob")
    waiting_for_approval(relayed)
    turn_cancel(turn=Turn.objects.get(pk=turn.pk))
    finish(turn)
    assert turn.status == "cancelled"
    assert email_tool == []
    assert relayed.texts(CHAT) == ["(stopped)"]
    assert TelegramReply.objects.get(pk=turn.pk).delivered_at is not None


def test_a_turn_taken_over_goes_on_in_the_messages_its_row_names(relayed, fake_llm, alice):
    """Another process began the reply (its message id is in the row): this one edits that
    message and sends none of its own."""
    [earlier] = client.send_text(CHAT, "the first worker's part")
    reply = "Taken over and " + words(10)
    fake_llm.queue(Reply(reply, delay=0.05))
    with transaction.atomic():
        turn = chat_submit(owner=alice, session_key=f"agent:telegram:per-peer:{CHAT}", message="hi")
        TelegramReply.objects.create(turn=turn, chat_id=CHAT, message_ids=[earlier])
    finish(turn)
    assert len(relayed.sent("sendMessage", chat_id=CHAT)) == 1  # the earlier one only
    assert relayed.texts(CHAT) == [reply]
    assert TelegramReply.objects.get(pk=turn.pk).message_ids == [earlier]


def unheard(fake_llm, alice, settings, reply: str) -> Turn:
    """A turn whose process delivered nothing (here: it had the bridge off, as a process that
    died between the turn's end and the delivery would have); the bridge is on again after."""
    token = settings.TELEGRAM_BOT_TOKEN
    settings.TELEGRAM_BOT_TOKEN = ""
    fake_llm.queue(Reply(reply))
    turn = start(alice, CHAT)
    finish(turn)
    settings.TELEGRAM_BOT_TOKEN = token
    return turn


def test_a_reply_no_relay_heard_is_delivered_by_the_sweep_once(relayed, fake_llm, alice, settings):
    """The periodic sweep delivers the stored reply no relay did, once, and leaves younger and
    delivered turns alone."""
    turn = unheard(fake_llm, alice, settings, "**Late** but whole: " + words(5))
    assert relay.replies_sweep() == 0  # it ended less than a minute ago: a relay may still come
    assert relayed.calls == []
    turn.refresh_from_db()
    later = turn.finished_at + timedelta(seconds=1)
    assert relay.replies_sweep(ended_before=later) == 1
    assert relay.idle(15)
    assert_final(relayed, CHAT, turn)
    assert relay.replies_sweep(ended_before=later) == 0  # delivered: never again


def test_without_a_broker_the_recovery_round_runs_the_sweep(relayed, fake_llm, alice, settings):
    """The embedded mode has no beat: its recovery thread's round (agents.services.recover_once)
    runs the sweep, registered by the app, and delivers what no relay did."""
    turn = unheard(fake_llm, alice, settings, "Swept in " + words(5))
    Turn.objects.filter(pk=turn.pk).update(finished_at=F("finished_at") - timedelta(minutes=2))
    recover_once()
    assert relay.idle(15)
    turn.refresh_from_db()
    assert_final(relayed, CHAT, turn)


def test_beat_runs_the_sweep_every_minute_through_a_registered_task():
    from celery import current_app
    from django.conf import settings as django_settings

    entry = django_settings.CELERY_BEAT_SCHEDULE["telegram-replies"]
    assert entry["task"] in current_app.tasks
    assert entry["schedule"] == 60.0
