"""The public page of a share link, /s/<token>/: anyone with the address reads the branch as it
stood, and nothing else; no cookie, no CSRF token, not indexed; a deleted link is a 404 at once."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import Branch
from sessions_app.selectors import current_branch
from sessions_app.services import branch_fork, session_create
from sharing.models import ShareLink
from sharing.services import share_create, share_delete
from tests.conftest import grow, say
from tests.security.conftest import browser
from tests.security.test_xss import assert_inert, fill_conversation, texts_of
from tests.security.xss_corpus import PAYLOADS

pytestmark = pytest.mark.django_db


def url(token: str) -> str:
    return f"/s/{token}/"


@pytest.fixture
def shared(alice, session, branch):
    alice.email = "alice@example.com"
    alice.save()
    say(branch, "the shared question", "the shared answer")
    share, token = share_create(owner=alice, branch=branch)
    return share, token


def assert_private(response) -> None:
    assert response["X-Robots-Tag"] == "noindex, nofollow"
    assert response["Referrer-Policy"] == "no-referrer"
    assert response["Cache-Control"] == "private, no-store"
    assert not response.cookies, response.cookies
    assert "Set-Cookie" not in response.headers


def test_anyone_with_the_address_reads_the_branch(client, shared):
    _, token = shared
    response = client.get(url(token))
    assert response.status_code == 200
    page = response.content.decode()
    assert "the shared question" in page
    assert "the shared answer" in page
    assert texts_of(response.content, "shared-summary")[0].startswith("2 messages · shared on ")
    assert '<meta name="robots" content="noindex,nofollow">' in page
    assert_private(response)


def test_the_page_names_neither_the_owner_nor_the_session(client, shared, alice, session):
    _, token = shared
    page = client.get(url(token)).content.decode()
    assert "alice" not in page.lower()
    assert "alice@example.com" not in page
    assert session.session_name not in page
    # No composer, no form, no control of the chat.
    assert "<form" not in page
    assert "<textarea" not in page
    assert "hx-" not in page
    assert "ws-connect" not in page


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_a_signed_in_visitor_gets_no_cookie_and_no_csrf_token(shared, alice, bob, who, settings):
    # Even when every request would save the session (and a flash message waits in it).
    settings.SESSION_SAVE_EVERY_REQUEST = True
    _, token = shared
    visitor = browser(alice if who == "alice" else bob)
    visitor.post("/accounts/profile/", {"theme": "dark", "auto_checkpoint": "on"})
    response = visitor.get(url(token))
    assert response.status_code == 200
    assert_private(response)
    page = response.content.decode()
    assert "csrfmiddlewaretoken" not in page
    assert "X-CSRFToken" not in page
    assert visitor.cookies["csrftoken"].value not in page
    assert "Preferences saved" not in page  # the flash stays for the owner's own pages


def test_a_deleted_link_is_a_404_at_once_without_cookies(client, shared, alice):
    share, token = shared
    assert client.get(url(token)).status_code == 200
    share_delete(owner=alice, share_id=share.pk)
    response = client.get(url(token))
    assert response.status_code == 404
    page = response.content.decode()
    assert "This link no longer works" in page
    assert "Ask whoever sent it for a new one." in page
    # A visitor who is not signed in is offered no conversations of theirs, nor a sign-in.
    assert "Back to your conversations" not in page
    assert 'data-testid="error-sign-in"' not in page
    assert "the shared" not in page
    assert_private(response)
    assert b"csrfmiddlewaretoken" not in response.content


@pytest.mark.parametrize(
    "token", ["x", "a" * 43, "a" * 42 + "-", "a" * 100, "%2e%2e", "a" * 42 + "%00"]
)
def test_an_unknown_or_malformed_token_is_a_404(client, shared, token):
    response = client.get(url(token))
    assert response.status_code == 404
    assert_private(response)


def test_other_methods_are_refused(shared):
    _, token = shared
    client = Client(enforce_csrf_checks=True)
    for method in ("post", "put", "patch", "delete"):
        response = getattr(client, method)(url(token))
        assert response.status_code in (403, 405), (method, response.status_code)
        assert b"the shared" not in response.content
    assert ShareLink.objects.get().views == 0


def test_visits_are_counted(client, shared):
    share, token = shared
    for _ in range(3):
        client.get(url(token))
    share.refresh_from_db()
    assert share.views == 3
    assert share.last_viewed_at is not None


def test_nothing_after_the_shared_point_and_no_other_branch(client, alice, session, branch):
    say(branch, "q1", "a1")
    cp = checkpoint_create(branch=branch, name="cp")
    say(branch, "after the checkpoint")
    branch_fork(branch=branch, position=1)
    other = Branch.objects.filter(session=session).exclude(pk=branch.pk).get()
    say(other, "on another branch")
    _, whole = share_create(owner=alice, branch=branch)
    say(branch, "said after sharing")
    _, upto = share_create(owner=alice, branch=branch, checkpoint=cp)
    page = client.get(url(whole)).content.decode()
    assert "after the checkpoint" in page
    assert "said after sharing" not in page
    assert "on another branch" not in page
    page = client.get(url(upto)).content.decode()
    assert "a1" in page
    assert "after the checkpoint" not in page


def test_a_rewound_branch_shows_what_was_shared_and_nothing_newer(client, alice, branch):
    say(branch, "q1", "a1")
    cp = checkpoint_create(branch=branch, name="cp")
    say(branch, "q2 before sharing")
    _, token = share_create(owner=alice, branch=branch)
    checkpoint_restore(checkpoint=cp, mode="rewind")
    branch.refresh_from_db()
    say(branch, "rewritten after the rewind")
    page = client.get(url(token)).content.decode()
    assert "a1" in page
    assert "rewritten after the rewind" not in page
    assert "q2 before sharing" not in page  # the rewind deleted it


def test_every_payload_is_inert_on_the_shared_page(client, alice):
    session = session_create(owner=alice, name="Payloads")
    branch = current_branch(session)
    fill_conversation(branch)
    branch.refresh_from_db()
    _, token = share_create(owner=alice, branch=branch)
    pages = []
    start = 0
    while True:
        page = client.get(url(token), {"from": start})
        assert page.status_code == 200
        pages.append(page.content)
        if b'data-testid="shared-later"' not in page.content:
            break
        start += 200
    assert len(pages) == -(-branch.message_count // 200)
    for page in pages:
        assert_inert(page, "one page of the shared conversation")
    assert_inert(b"".join(pages), "the shared conversation", PAYLOADS)
    assert Checkpoint.objects.filter(branch=branch).exists()


def test_a_long_history_is_read_a_page_at_a_time_in_the_same_queries(client, alice):
    def visit(n: int) -> tuple[int, bytes]:
        branch = current_branch(session_create(owner=alice, name=f"long {n}"))
        grow(branch, n)
        _, token = share_create(owner=alice, branch=branch)
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url(token))
        assert response.status_code == 200
        return len(queries), response.content

    small, _ = visit(10)
    large, page = visit(10_000)
    assert small == large
    assert page.count(b'data-testid="message"') == 200
    assert b"message 9999" in page
    assert b"message 9799<" not in page
    assert b'href="?from=9600"' in page  # Earlier messages


def test_a_page_number_that_is_not_one_is_a_400(client, shared):
    _, token = shared
    for value in ("abc", "-1", "1e3", "9" * 20):
        response = client.get(url(token), {"from": value})
        assert response.status_code == 400, value
        assert_private(response)
