"""The chat header's usage: what the conversation's model calls used so far (tokens and cost)
and, when it differs, what those of the current branch used, read with the rest of the header
(the page and the refresh the socket has every tab fetch when a turn ends)."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse

from sessions_app.selectors import current_branch
from sessions_app.services import branch_fork
from tests.fakes.chat_server import Reply
from tests.usage.conftest import header_usage, price
from usage.models import UsageRecord
from usage.selectors import totals

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def _send(client, session, llm, on_commit, text: str, reply: Reply) -> None:
    llm.queue(reply)
    with on_commit(execute=True):
        response = client.post(reverse("chat:send", args=[session.pk]), {"message": text}, **HX)
        assert response.status_code == 200


def _refresh(client, session) -> str:
    return client.get(reverse("chat:refresh", args=[session.pk]), **HX).content.decode()


def test_a_new_conversation_shows_no_usage(as_alice, session):
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-testid="conversation-usage"' not in page


def test_the_header_adds_up_the_conversations_turns_and_refreshes_when_one_ends(
    as_alice, session, fake_llm, inline_turns, django_capture_on_commit_callbacks
):
    price("fake-model", "3", "15")
    on_commit = django_capture_on_commit_callbacks
    _send(
        as_alice,
        session,
        fake_llm,
        on_commit,
        "one",
        Reply("1", prompt_tokens=1_000, completion_tokens=234),
    )
    got = totals(UsageRecord.objects.filter(session=session))
    assert got.tokens == 1_234  # the fake server's count, as recorded
    assert header_usage(_refresh(as_alice, session)) == f"1,234 tokens · ${got.cost:.4f}"

    _send(
        as_alice,
        session,
        fake_llm,
        on_commit,
        "two",
        Reply("2", prompt_tokens=2_000, completion_tokens=100),
    )
    got = totals(UsageRecord.objects.filter(session=session))
    assert got.tokens == 3_334
    # (3,000 × 3 + 334 × 15) / 1e6 = $0.01401: the refresh a turn's end brings, and the page.
    assert header_usage(_refresh(as_alice, session)) == "3,334 tokens · $0.0140"
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert header_usage(page) == "3,334 tokens · $0.0140"


def test_a_branch_shows_its_own_share_when_it_differs(
    as_alice, session, branch, fake_llm, inline_turns, django_capture_on_commit_callbacks
):
    on_commit = django_capture_on_commit_callbacks
    _send(
        as_alice,
        session,
        fake_llm,
        on_commit,
        "one",
        Reply("1", prompt_tokens=500, completion_tokens=500),
    )
    branch_fork(branch=current_branch(session), position=0)
    page = _refresh(as_alice, session)
    assert header_usage(page) == "1,000 tokens · $0.00 · this branch 0 tokens"
    _send(
        as_alice,
        session,
        fake_llm,
        on_commit,
        "two",
        Reply("2", prompt_tokens=30, completion_tokens=12),
    )
    page = _refresh(as_alice, session)
    assert header_usage(page) == "1,042 tokens · $0.00 · this branch 42 tokens"
    title = re.search(r'data-testid="conversation-usage" title="([^"]+)"', page)
    assert title is not None
    assert "this branch's own messages 42 tokens" in unescape(title.group(1))
