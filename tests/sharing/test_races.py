"""Share links under concurrent writers, on PostgreSQL (SQLite serialises every writer)."""

from __future__ import annotations

import pytest

from sessions_app.models import Message
from sessions_app.selectors import current_branch
from sessions_app.services import message_append, session_create
from sharing.errors import ShareLimitReached
from sharing.models import ShareLink
from sharing.selectors import shared_page
from sharing.services import share_create, share_viewed
from tests.sessions_app.test_concurrency import _run_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_simultaneous_links_never_pass_the_per_user_limit(alice, settings):
    """share_create counts the owner's links under a lock on the owner's row."""
    settings.ROLLBACK_MAX_SHARES_PER_USER = 3
    branch = current_branch(session_create(owner=alice, name="s"))
    errors = _run_threads(lambda i: share_create(owner=alice, branch=branch), 8)
    assert len(errors) == 5, errors
    assert all(isinstance(e, ShareLimitReached) for e in errors), errors
    assert ShareLink.objects.filter(owner=alice).count() == 3


def test_simultaneous_visits_all_count(alice):
    branch = current_branch(session_create(owner=alice, name="s"))
    share, _ = share_create(owner=alice, branch=branch)

    def work(i: int) -> None:
        for _ in range(10):
            share_viewed(share=share)

    assert _run_threads(work, 6) == []
    share.refresh_from_db()
    assert share.views == 60


def test_a_link_made_while_messages_are_written_shows_a_whole_prefix(alice):
    """Each link shows exactly the first message_count messages: never a gap, never a message
    written after it (the session's lock orders it with every append)."""
    branch = current_branch(session_create(owner=alice, name="busy"))

    def work(i: int) -> None:
        if i == 0:
            for _ in range(10):
                share_create(owner=alice, branch=branch)
        else:
            for j in range(15):
                message_append(branch=branch, role="user", content=f"{i}-{j}")

    assert _run_threads(work, 4) == []
    for share in ShareLink.objects.select_related("branch"):
        page = shared_page(share, size=1000)
        assert page.count == share.message_count
        assert [m.position for m in page.messages] == list(range(share.message_count))
    assert Message.objects.count() == 45
