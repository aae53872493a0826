"""Link codes (`/start CODE`) are limited per chat and per Telegram user: past a limit the chat
is told once when it may try again, and later attempts are dropped by the webhook (stored as
handled, never claimed: no task, no answer)."""

from __future__ import annotations

import pytest

from integrations.models import TelegramChat, TelegramUpdate
from integrations.telegram.errors import LinkAttemptsLimited, LinkCodeUnknown
from integrations.telegram.links import link_code_create
from integrations.telegram.updates import PRIVATE_ONLY
from tests.integrations.updates import CHAT, message, post, said

pytestmark = pytest.mark.django_db(transaction=True)

UNKNOWN = LinkCodeUnknown().message
LIMITED = "Too many link attempts; try again in 15 minutes."


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.TELEGRAM_LINK_ATTEMPTS_PER_CHAT = 3
    settings.TELEGRAM_LINK_ATTEMPTS_PER_USER = 5
    settings.TELEGRAM_LINK_WINDOW_SECONDS = 15 * 60


def attempt(client, code: str = "WRONG234", **where) -> int:
    """Post `/start CODE` (from `chat_id`, sent by `sender`); its update_id."""
    sender = where.pop("sender", where.get("chat_id", CHAT))
    update = message(f"/start {code}", **where)
    update["message"]["from"]["id"] = sender
    assert post(client, update).status_code == 200
    return update["update_id"]


def never_handled(update_id: int) -> bool:
    """Dropped by the webhook: stored as handled, no handler ever claimed it."""
    row = TelegramUpdate.objects.get(pk=update_id)
    return row.handled_at is not None and row.attempts == 0


def test_a_chat_past_its_limit_is_told_once_then_costs_no_task_and_no_answer(
    client, telegram, inline_turns
):
    for _ in range(3):
        attempt(client)
    assert said(telegram) == [UNKNOWN] * 3
    fourth = attempt(client)
    assert said(telegram)[3].startswith(LIMITED)
    assert not never_handled(fourth)  # the one that was told
    later = [attempt(client) for _ in range(5)]
    assert len(said(telegram)) == 4
    assert all(never_handled(update_id) for update_id in later)


def test_a_right_code_past_the_limit_does_not_link_either(client, telegram, inline_turns, alice):
    for _ in range(4):
        attempt(client)
    attempt(client, link_code_create(user=alice).code)
    assert not TelegramChat.objects.exists()
    assert len(said(telegram)) == 4


def test_another_chat_has_its_own_count(client, telegram, inline_turns, alice):
    for _ in range(4):
        attempt(client)
    other = CHAT + 1
    attempt(client, chat_id=other)
    assert said(telegram, other) == [UNKNOWN]
    attempt(client, link_code_create(user=alice).code, chat_id=other)
    assert said(telegram, other)[-1].startswith("Linked to Rollback as alice.")


def test_a_code_that_links_starts_the_count_again(client, telegram, inline_turns, alice):
    attempt(client)
    attempt(client)
    attempt(client, link_code_create(user=alice).code)
    assert TelegramChat.objects.get().user == alice
    for _ in range(3):
        attempt(client)
    assert said(telegram)[-3:] == [UNKNOWN] * 3


def test_a_user_is_counted_in_all_their_chats(client, telegram, inline_turns):
    """The sender's five attempts, in their private chat and in two groups (where the bot only
    says it works in private chats), use up the user's limit: a sixth, in a chat with attempts
    left, is refused."""
    sender = CHAT
    attempt(client, chat_id=sender)
    attempt(client, chat_id=sender)
    for group in (-100, -200):
        attempt(client, chat_id=group, chat_type="group", sender=sender)
    attempt(client, chat_id=-300, chat_type="group", sender=sender)
    assert said(telegram, sender) == [UNKNOWN, UNKNOWN]
    assert said(telegram, -100) == said(telegram, -200) == said(telegram, -300) == [PRIVATE_ONLY]

    sixth = attempt(client, chat_id=-400, chat_type="group", sender=sender)
    assert said(telegram, -400)[0].startswith(LIMITED)
    assert not never_handled(sixth)
    dropped = attempt(client, chat_id=sender)
    assert never_handled(dropped)
    assert said(telegram, sender) == [UNKNOWN, UNKNOWN]

    attempt(client, chat_id=CHAT + 7)  # someone else: their own counts
    assert said(telegram, CHAT + 7) == [UNKNOWN]


def test_attempts_arriving_together_past_the_limit_are_told_once(telegram, inline_turns):
    """Updates that passed the webhook before the count was full (a burst): the handler refuses
    them, and only the first refusal is answered."""
    from integrations.telegram import inbox
    from integrations.telegram.updates import update_handle

    ids = []
    for _ in range(6):
        update = message("/start WRONG234")
        inbox.update_store(update_id=update["update_id"], payload=update)
        ids.append(update["update_id"])
    for update_id in ids:
        update_handle(update_id=update_id)
    texts = said(telegram)
    assert texts[:3] == [UNKNOWN] * 3
    assert len(texts) == 4
    assert texts[3].startswith(LIMITED)


def test_limits_of_zero_are_off(client, telegram, inline_turns, settings):
    settings.TELEGRAM_LINK_ATTEMPTS_PER_CHAT = 0
    settings.TELEGRAM_LINK_ATTEMPTS_PER_USER = 0
    for _ in range(6):
        attempt(client)
    assert said(telegram) == [UNKNOWN] * 6


def test_the_refusal_names_when_to_try_again():
    exc = LinkAttemptsLimited(retry_after=61, first=True)
    assert exc.message.startswith("Too many link attempts; try again in 2 minutes.")
    assert exc.code == "throttled"
