"""Telegram is a door like the others (issue 40): a message from a linked chat is refused, with
the reason said in the chat, when its user's access gives them no model or a budget of theirs is
used up; nothing is stored and the model is not called."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone

from integrations.telegram.links import link_code_consume, link_code_create
from sessions_app.models import Message, Turn
from tests.access.conftest import grant
from tests.fakes.chat_server import Reply
from tests.integrations.updates import message, post, said
from tests.usage.conftest import record
from usage.models import Budget

pytestmark = pytest.mark.django_db(transaction=True)

CHAT = 424242


@pytest.fixture
def linked(alice):
    return link_code_consume(code=link_code_create(user=alice).code, chat_id=CHAT, title="a")


def test_a_telegram_message_over_budget_is_told_when_the_budget_renews(
    client, telegram, fake_llm, inline_turns, linked, alice
):
    Budget.objects.create(user=alice, period="day", unit="tokens", limit=Decimal(50))
    record(alice, "fake-model", 40, 20, on=timezone.now())
    assert post(client, message("hello", update_id=801)).status_code == 200
    telegram.wait_for(lambda _: any("budget" in t for t in said(telegram)))
    told = next(t for t in said(telegram) if "budget" in t)
    assert "Your daily budget of 50 tokens is used up (60 tokens used)" in told
    assert "renews at" in told
    assert not Turn.objects.exists()
    assert not Message.objects.filter(content="hello").exists()
    assert fake_llm.requests == []


def test_a_telegram_message_of_a_user_with_no_model_is_refused_in_words(
    client, telegram, fake_llm, inline_turns, linked, alice
):
    grant("no models", alice, all_models=False, model_ids="")
    assert post(client, message("hello", update_id=802)).status_code == 200
    telegram.wait_for(lambda _: any("ask an administrator" in t for t in said(telegram)))
    assert not Turn.objects.exists()
    assert fake_llm.requests == []


def test_a_telegram_message_within_the_users_access_and_budget_is_answered(
    client, telegram, fake_llm, inline_turns, linked, alice, settings
):
    settings.AGENT_ALLOWED_MODELS = ["fake-small"]
    grant("small", alice, all_models=False, model_ids="fake-small")
    Budget.objects.create(user=alice, period="day", unit="tokens", limit=Decimal(1000))
    fake_llm.queue(Reply("Small says hi."))
    assert post(client, message("hello", update_id=803)).status_code == 200
    telegram.wait_for(lambda _: "Small says hi." in telegram.texts(CHAT))
    assert fake_llm.requests[0]["model"] == "fake-small"
