"""The usage page, the chat header and GET /api/v1/usage/ say the same as the transactions the
turns recorded: real turns, answered by the fake model server, priced, summed three ways."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.db.models import Sum
from django.test import Client
from django.urls import reverse

from tests.fakes.chat_server import Reply
from tests.usage.conftest import header_usage, price
from tests.web.api.conftest import bearer_client
from usage.models import Budget, UsageRecord, amount_shown

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_page_the_header_and_the_api_agree_with_the_recorded_turns(
    alice, bob, fake_llm, inline_turns
):
    price("fake-model", "2.5", "10")
    Budget.objects.create(user=alice, period="month", unit="tokens", limit=Decimal(100_000))
    api = bearer_client(alice)
    sid = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()["id"]
    for n, text in enumerate(("One.", "Two.", "Three.")):
        fake_llm.queue(Reply(text, prompt_tokens=1_000 * (n + 1), completion_tokens=123))
        done = api.post(
            f"/api/v1/sessions/{sid}/turns/", {"message": text, "wait": True}, format="json"
        )
        assert done.json()["status"] == "done"
    # Bob's own turn, which none of alice's figures may count.
    bobs = bearer_client(bob)
    bob_sid = bobs.post("/api/v1/sessions/", {"name": "b"}, format="json").json()["id"]
    fake_llm.queue(Reply("Bob's.", prompt_tokens=77_777, completion_tokens=7))
    bobs.post(f"/api/v1/sessions/{bob_sid}/turns/", {"message": "hi", "wait": True}, format="json")

    recorded = UsageRecord.objects.filter(user=alice).aggregate(
        i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cost")
    )
    tokens_in, tokens_out, cost = recorded["i"], recorded["o"], recorded["c"]
    assert tokens_in >= 6_000  # the three turns (and any title call)
    day = UsageRecord.objects.filter(user=alice).first().created_at.date().isoformat()

    body = api.get("/api/v1/usage/").json()
    assert body["total"] == {
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cost": float(round(cost, 6)),
    }
    assert [d["date"] for d in body["days"]] == [day]
    assert [m["model"] for m in body["models"]] == ["fake-model"]
    assert body["budget"]["used"] == tokens_in + tokens_out
    assert body["budget"]["limit"] == 100_000

    browser = Client()
    browser.force_login(alice)
    page = browser.get("/accounts/usage/").content.decode()
    total = (
        f"{tokens_in + tokens_out:,} tokens</strong> ({tokens_in:,} input, {tokens_out:,} output)"
    )
    assert total in page
    assert amount_shown(cost, Budget.Unit.COST) in page
    words = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page))
    assert f"{tokens_in + tokens_out:,} tokens of 100,000 tokens used" in words
    assert "77,777" not in page

    chat = browser.get(reverse("chat:session", args=[sid])).content.decode()
    assert header_usage(chat) == f"{tokens_in + tokens_out:,} tokens · {amount_shown(cost, 'cost')}"
