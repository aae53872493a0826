"""Share links: what a link shows (the branch as it stood, up to a checkpoint), its token, the
limit, deletion and visits."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from checkpoints.services import checkpoint_create, checkpoint_delete, checkpoint_restore
from sessions_app.models import Branch
from sessions_app.selectors import current_branch
from sessions_app.services import branch_fork, message_append, session_create, session_delete
from sharing.errors import CheckpointNotInBranch, ShareLimitReached, ShareNotFound
from sharing.models import ShareLink
from sharing.selectors import (
    get_share_for_user,
    share_for_token,
    share_token,
    shared_page,
    shares_for_user,
)
from sharing.services import share_create, share_delete, share_viewed
from sharing.tokens import TOKEN_SHAPE
from tests.conftest import contents, grow, say

pytestmark = pytest.mark.django_db


def shown(share: ShareLink, size: int = 1000) -> list[str]:
    share = ShareLink.objects.select_related("branch").get(pk=share.pk)
    return contents(shared_page(share, size=size).messages)


def test_a_link_shows_the_branch_as_it_stood_when_shared(alice, branch):
    say(branch, "q1", "a1")
    share, _ = share_create(owner=alice, branch=branch)
    say(branch, "q2", "a2")
    assert share.message_count == 2
    assert shown(share) == ["q1", "a1"]


def test_a_link_up_to_a_checkpoint_shows_nothing_after_it(alice, branch):
    say(branch, "q1", "a1")
    cp = checkpoint_create(branch=branch, name="start")
    say(branch, "q2", "a2")
    share, _ = share_create(owner=alice, branch=branch, checkpoint=cp)
    assert share.message_count == 2
    assert share.checkpoint == cp
    assert shown(share) == ["q1", "a1"]


def test_a_checkpoint_of_an_ancestor_before_the_fork_may_be_shared(alice, branch):
    say(branch, "q1", "a1")
    early = checkpoint_create(branch=branch, name="early")
    say(branch, "q2", "a2")
    late = checkpoint_create(branch=branch, name="late")
    fork = branch_fork(branch=branch, position=2, forked_from_id=early.pk)
    message_append(branch=fork, role="user", content="other")
    share, _ = share_create(owner=alice, branch=fork, checkpoint=early)
    assert shown(share) == ["q1", "a1"]
    # The parent's later checkpoint is no point of the fork's history.
    with pytest.raises(CheckpointNotInBranch):
        share_create(owner=alice, branch=fork, checkpoint=late)


def test_a_checkpoint_of_another_session_is_refused(alice, branch):
    other = current_branch(session_create(owner=alice, name="other"))
    say(other, "x")
    cp = checkpoint_create(branch=other, name="elsewhere")
    with pytest.raises(CheckpointNotInBranch):
        share_create(owner=alice, branch=branch, checkpoint=cp)
    assert not ShareLink.objects.exists()


def test_a_rewind_below_the_shared_point_leaks_no_new_message(alice, branch):
    say(branch, "q1", "a1")
    cp = checkpoint_create(branch=branch, name="start")
    say(branch, "q2", "a2")
    share, _ = share_create(owner=alice, branch=branch)
    checkpoint_restore(checkpoint=cp, mode="rewind")
    branch.refresh_from_db()
    say(branch, "new question", "new answer", "more")
    # Positions 2 and 3 now hold newer messages: the link shows none of them.
    assert shown(share) == ["q1", "a1"]


def test_a_rewind_that_deletes_the_branch_takes_its_links(alice, branch):
    say(branch, "q1", "a1")
    cp = checkpoint_create(branch=branch, name="start")
    say(branch, "q2")
    fork = branch_fork(branch=branch, position=3)
    share, token = share_create(owner=alice, branch=fork)
    checkpoint_restore(checkpoint=cp, mode="rewind")
    assert not Branch.objects.filter(pk=fork.pk).exists()
    assert not ShareLink.objects.filter(pk=share.pk).exists()
    assert share_for_token(token) is None


def test_deleting_the_checkpoint_keeps_the_link_and_its_point(alice, branch):
    say(branch, "q1", "a1")
    cp = checkpoint_create(branch=branch, name="start")
    say(branch, "q2")
    share, _ = share_create(owner=alice, branch=branch, checkpoint=cp)
    checkpoint_delete(checkpoint=cp)
    share.refresh_from_db()
    assert share.checkpoint is None
    assert shown(share) == ["q1", "a1"]


def test_deleting_the_session_deletes_its_links(alice, session, branch):
    share_create(owner=alice, branch=branch)
    session_delete(session=session)
    assert not ShareLink.objects.exists()


def test_the_token_is_256_bits_and_only_its_hash_is_stored(alice, branch):
    share, token = share_create(owner=alice, branch=branch)
    assert TOKEN_SHAPE.fullmatch(token)
    assert len(token) == 43  # 32 bytes, unpadded base64url
    row = ShareLink.objects.values().get(pk=share.pk)
    assert token not in {str(value) for value in row.values()}
    assert row["token_hash"] == hashlib.sha256(token.encode()).hexdigest()
    assert share_for_token(token) == share
    assert share_token(share) == token  # the profile can show the address again


def test_two_links_never_share_a_token(alice, branch):
    tokens = {share_create(owner=alice, branch=branch)[1] for _ in range(20)}
    assert len(tokens) == 20


@pytest.mark.parametrize(
    "token",
    ["", "x", "a" * 43, "a" * 42 + "!", "a" * 44, "../" * 20, "é" * 43, "a" * 10_000],
)
def test_an_unknown_or_malformed_token_finds_nothing(alice, branch, token):
    share_create(owner=alice, branch=branch)
    assert share_for_token(token) is None


def test_after_a_secret_key_change_the_link_works_but_its_address_is_not_shown(
    alice, branch, settings
):
    share, token = share_create(owner=alice, branch=branch)
    settings.SECRET_KEY = "another-key-" + "x" * 50
    assert share_for_token(token) == share
    assert share_token(share) is None


def test_deleting_a_link_makes_its_token_find_nothing_at_once(alice, branch):
    share, token = share_create(owner=alice, branch=branch)
    share_delete(owner=alice, share_id=share.pk)
    assert share_for_token(token) is None


def test_bob_cannot_see_or_delete_alices_link(alice, bob, branch):
    share, token = share_create(owner=alice, branch=branch)
    with pytest.raises(ShareNotFound):
        share_delete(owner=bob, share_id=share.pk)
    with pytest.raises(ShareNotFound):
        get_share_for_user(bob, share.pk)
    assert list(shares_for_user(bob)) == []
    assert share_for_token(token) == share


def test_the_limit_of_links_per_user_is_a_conflict(alice, bob, branch, settings):
    settings.ROLLBACK_MAX_SHARES_PER_USER = 2
    share_create(owner=alice, branch=branch)
    share_create(owner=alice, branch=branch)
    with pytest.raises(ShareLimitReached):
        share_create(owner=alice, branch=branch)
    assert ShareLink.objects.count() == 2
    bobs = current_branch(session_create(owner=bob, name="bob's"))
    share_create(owner=bob, branch=bobs)  # the limit is per user


def test_visits_are_counted(alice, branch):
    share, _ = share_create(owner=alice, branch=branch)
    for _ in range(3):
        share_viewed(share=share)
    share.refresh_from_db()
    assert share.views == 3
    assert share.last_viewed_at is not None


def test_a_page_of_a_long_history_costs_the_same_queries_at_10_and_10000(alice, branch):
    def count(n: int) -> int:
        b = current_branch(session_create(owner=alice, name=f"{n}"))
        grow(b, n)
        fork = branch_fork(branch=b, position=n // 2)
        grow(fork, n - n // 2)
        share, _ = share_create(owner=alice, branch=fork)
        share = ShareLink.objects.select_related("branch").get(pk=share.pk)
        with CaptureQueriesContext(connection) as queries:
            page = shared_page(share, size=200)
        assert page.count == n
        assert len(page.messages) == min(200, n)
        assert page.messages[-1].content == f"message {n - 1}"
        return len(queries)

    assert count(10) == count(10_000) == 3


def test_a_page_starts_where_asked_and_stays_within_the_history(alice, branch):
    grow(branch, 50)
    share, _ = share_create(owner=alice, branch=branch)
    share = ShareLink.objects.select_related("branch").get(pk=share.pk)
    first = shared_page(share, size=20, start=0)
    assert (first.start, first.end) == (0, 20)
    assert contents(first.messages)[0] == "message 0"
    last = shared_page(share, size=20)
    assert (last.start, last.end) == (30, 50)
    beyond = shared_page(share, size=20, start=10**9)
    assert (beyond.start, beyond.end) == (49, 50)


def test_a_link_stops_working_when_its_owner_is_deactivated_or_loses_the_session(
    alice, bob, session, branch
):
    _, token = share_create(owner=alice, branch=branch)
    alice.is_active = False
    alice.save()
    assert share_for_token(token) is None
    alice.is_active = True
    alice.save()
    assert share_for_token(token) is not None
    session.owner = bob
    session.save()
    assert share_for_token(token) is None
