"""Search through the pages (issue 25): snippets in the sidebar, a hit opened in its place
(the history around it, whatever its position), the search inside a conversation, and what a
search that cannot be read gets."""

from __future__ import annotations

import html
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from sessions_app.models import Message
from sessions_app.selectors import current_branch
from sessions_app.services import branch_fork, message_append, session_create
from tests.conftest import grow, say
from web.places import MESSAGE_GONE

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def test_a_hit_in_the_sidebar_shows_a_marked_and_escaped_snippet_linking_to_its_message(
    as_alice, alice
):
    chat = session_create(owner=alice, name="Untitled")
    say(chat.branches.get(), "<img src=x onerror=alert(1)> please restore it", "done")
    hit = Message.objects.get(content__startswith="<img")
    body = as_alice.get(reverse("chat:session_list"), {"q": "restor"}, **HX).content.decode()
    assert 'data-testid="search-snippet"' in body
    assert f'href="/chat/{chat.pk}/?message={hit.pk}"' in body
    assert "&lt;img src=x onerror=alert(1)&gt; please <mark>restore</mark> it" in body
    assert "<img" not in body


def test_a_session_found_by_its_name_alone_shows_no_snippet(as_alice, alice):
    session_create(owner=alice, name="Restoring notes")
    body = as_alice.get(reverse("chat:session_list"), {"q": "restor"}, **HX).content.decode()
    assert "Restoring notes" in body
    assert 'data-testid="search-snippet"' not in body


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("\x1b[2J", "The search cannot contain control characters."),
        ("?!.,;", "Type a word to search for: the search holds no letter or digit."),
        ("y" * 201, "The search is 201 characters long; the limit is 200."),
    ],
)
def test_a_sidebar_search_that_cannot_be_read_says_why_in_the_list(as_alice, alice, query, reason):
    session_create(owner=alice, name="Anything")
    response = as_alice.get(reverse("chat:session_list"), {"q": query}, **HX)
    assert response.status_code == 200
    body = response.content.decode()
    assert f'data-testid="search-error">{reason}' in body
    assert "Anything" not in body


@pytest.fixture
def long_chat(alice):
    chat = session_create(owner=alice, name="Long")
    grow(chat.branches.get(), 10_000)
    return chat


def _message(chat, position: int) -> Message:
    return Message.objects.get(branch__session=chat, position=position)


def test_a_message_10000_back_opens_in_its_place_with_load_earlier_and_later(as_alice, long_chat):
    target = _message(long_chat, 120)
    body = as_alice.get(f"/chat/{long_chat.pk}/?message={target.pk}").content.decode()
    assert f'data-target-message="{target.pk}"' in body
    assert f'id="msg-{target.pk}"' in body
    assert ">message 70<" in body  # 50 before
    assert ">message 169<" in body  # and 49 after it
    assert ">message 170<" not in body
    assert ">message 9999<" not in body
    assert "Load earlier messages (70 more)" in body
    assert f"/chat/{long_chat.pk}/messages/later/?after=170" in body
    # Load later: the next page, and a button for the one after.
    later = as_alice.get(f"/chat/{long_chat.pk}/messages/later/?after=170", **HX).content.decode()
    assert ">message 170<" in later
    assert ">message 269<" in later
    assert ">message 169<" not in later
    assert "after=270" in later
    # The last page has no button.
    last = as_alice.get(f"/chat/{long_chat.pk}/messages/later/?after=9950", **HX).content.decode()
    assert ">message 9999<" in last
    assert 'data-testid="load-later"' not in last


def test_opening_a_message_costs_the_same_queries_wherever_it_sits(as_alice, long_chat):
    as_alice.get(f"/chat/{long_chat.pk}/")  # reads the access rules, cached after (access.cache)
    counts = []
    for position in (60, 5_000, 9_000):
        target = _message(long_chat, position)
        with CaptureQueriesContext(connection) as queries:
            response = as_alice.get(f"/chat/{long_chat.pk}/?message={target.pk}")
        assert response.status_code == 200
        assert f'data-target-message="{target.pk}"' in response.content.decode()
        counts.append(len(queries))
    assert counts[0] == counts[1] == counts[2]


def test_a_message_among_the_latest_opens_in_the_usual_page(as_alice, long_chat):
    target = _message(long_chat, 9_990)
    body = as_alice.get(f"/chat/{long_chat.pk}/?message={target.pk}").content.decode()
    assert f'data-target-message="{target.pk}"' in body
    assert ">message 9999<" in body
    assert 'data-testid="load-later"' not in body


def test_another_users_or_a_missing_message_is_a_notice_and_reveals_nothing(as_alice, alice, bob):
    mine = session_create(owner=alice, name="Mine")
    say(mine.branches.get(), "hello")
    theirs = session_create(owner=bob, name="Theirs")
    message_append(branch=theirs.branches.get(), role="user", content="bob's secret words")
    bobs = Message.objects.get(branch__session=theirs)
    for value in (str(bobs.pk), "999999999", "abc", "-1", "1" * 40):
        response = as_alice.get(f"/chat/{mine.pk}/?message={value}")
        assert response.status_code == 200, value
        body = response.content.decode()
        assert MESSAGE_GONE in body
        assert "secret" not in body
        assert "data-target-message" not in body
    # Bob's session itself stays a 404 for alice, message or not.
    assert as_alice.get(f"/chat/{theirs.pk}/?message={bobs.pk}").status_code == 404


def test_a_message_of_another_branch_opens_that_branch_read_only_in_its_place(as_alice, alice):
    chat = session_create(owner=alice, name="Branches")
    main = chat.branches.get()
    say(main, "first", "one", "abandoned question", "two")
    main.refresh_from_db()
    fork = branch_fork(branch=main, position=2)
    abandoned = Message.objects.get(content="abandoned question")
    response = as_alice.get(f"/chat/{chat.pk}/?message={abandoned.pk}")
    read = reverse("chat:branch_read", args=[chat.pk, main.pk])
    assert response.status_code == 302
    assert response["Location"] == f"{read}?message={abandoned.pk}"
    body = as_alice.get(response["Location"]).content.decode()
    assert f'data-target-message="{abandoned.pk}"' in body
    assert current_branch(chat).pk == fork.pk  # reading it switched nothing
    # "Continue here": that branch is current again, the message shown in its place.
    response = as_alice.post(
        reverse("chat:branch_continue", args=[chat.pk, main.pk]), {"message": abandoned.pk}
    )
    assert response.status_code == 302
    assert response["Location"] == f"/chat/{chat.pk}/?message={abandoned.pk}"
    assert current_branch(chat).pk == main.pk
    body = as_alice.get(response["Location"]).content.decode()
    assert f'data-target-message="{abandoned.pk}"' in body


def test_switching_to_the_branch_of_another_users_message_is_404(as_alice, alice, bob):
    mine = session_create(owner=alice, name="Mine")
    theirs = session_create(owner=bob, name="Theirs")
    message_append(branch=theirs.branches.get(), role="user", content="bob's")
    bobs = Message.objects.get(branch__session=theirs)
    url = reverse("chat:message_branch", args=[mine.pk, bobs.pk])
    assert as_alice.post(url).status_code == 404
    url = reverse("chat:message_branch", args=[theirs.pk, bobs.pk])
    assert as_alice.post(url).status_code == 404


def test_the_search_in_a_conversation_lists_hits_of_its_branch_with_snippets(as_alice, alice, bob):
    chat = session_create(owner=alice, name="Chat")
    say(chat.branches.get(), "we restored <b>it</b>", "fine", "restore once more", "ok")
    other = session_create(owner=alice, name="Other")
    say(other.branches.get(), "restore elsewhere")
    url = reverse("chat:search", args=[chat.pk])
    body = as_alice.get(url, {"q": "restor"}, **HX).content.decode()
    assert body.count('data-testid="conversation-hit"') == 2
    assert body.index("<mark>restore</mark> once more") < body.index("<mark>restored</mark>")
    assert "&lt;b&gt;it&lt;/b&gt;" in body
    assert "elsewhere" not in body
    first = Message.objects.get(content="restore once more")
    assert f'href="/chat/{chat.pk}/?message={first.pk}"' in body
    assert "No message of this branch matches" in as_alice.get(url, {"q": "zebra"}).content.decode()
    refused = as_alice.get(url, {"q": "\x07"}, **HX)
    assert refused.status_code == 200
    assert "The search cannot contain control characters." in refused.content.decode()
    # Bob cannot search alice's conversation.
    as_alice.force_login(bob)
    assert as_alice.get(url, {"q": "restor"}, **HX).status_code == 404


def test_the_chat_page_offers_the_search_in_the_conversation(as_alice, alice):
    chat = session_create(owner=alice, name="Chat")
    body = as_alice.get(f"/chat/{chat.pk}/").content.decode()
    assert 'data-testid="conversation-search-input"' in body
    assert reverse("chat:search", args=[chat.pk]) in body
    assert current_branch(chat).message_count == 0


def _hit_positions(body: str) -> list[int]:
    return [int(p) - 1 for p in re.findall(r'class="hit-role">\w+ · #(\d+)<', body)]


def test_the_search_in_a_conversation_counts_every_hit_and_shows_older_ones_in_place(
    as_alice, alice, bob
):
    chat = session_create(owner=alice, name="Chat")
    branch = chat.branches.get()
    grow(branch, 75)  # "message 0" … "message 74": every one matches
    say(branch, "nothing to see")
    url = reverse("chat:search", args=[chat.pk])
    first = as_alice.get(url, {"q": "messag"}, **HX).content.decode()
    assert "75 messages on this branch, newest first" in first
    assert _hit_positions(first) == list(range(74, 44, -1))
    button = re.search(r'<button[^>]*data-testid="conversation-search-more"[^>]*>', first)
    assert button is not None
    assert 'hx-target="#conversation-more"' in button.group(0)
    assert 'hx-swap="outerHTML"' in button.group(0)
    more = html.unescape(re.search(r'hx-get="([^"]+)"', button.group(0)).group(1))
    assert more == f"{url}?q=messag&before=45"

    # "Show more": the next older hits alone (items for the list, no count), then the last ones.
    second = as_alice.get(more, **HX).content.decode()
    assert _hit_positions(second) == list(range(44, 14, -1))
    assert "conversation-search-count" not in second
    assert "<ul" not in second
    more = html.unescape(re.search(r'hx-get="([^"]+)"', second).group(1))
    assert more == f"{url}?q=messag&before=15"
    third = as_alice.get(more, **HX).content.decode()
    assert _hit_positions(third) == list(range(14, -1, -1))
    assert "conversation-search-more" not in third

    # A search that the first page holds whole says its count, with no "Show more".
    few = as_alice.get(url, {"q": "message 7"}, **HX).content.decode()
    assert "6 messages on this branch" in few  # "message 7", "message 70" … "message 74"
    assert "conversation-search-more" not in few

    # Bob cannot read the next pages of alice's conversation either.
    as_alice.force_login(bob)
    assert as_alice.get(more, **HX).status_code == 404
