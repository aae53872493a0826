"""The owner's side of share links in the pages: the branch's Share dialog in the chat, the
profile's list, Delete."""

from __future__ import annotations

import re

import pytest

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.selectors import current_branch
from sessions_app.services import session_create
from sharing.models import ShareLink
from sharing.services import share_create
from tests.conftest import say
from tests.security.conftest import browser
from tests.security.test_xss import assert_inert
from tests.security.xss_corpus import NAMES

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(alice):
    return browser(alice)


def test_every_branch_of_the_tree_has_a_share_button(as_alice, session, branch):
    page = as_alice.get(f"/chat/{session.pk}/").content.decode()
    assert f'hx-get="/shares/branches/{branch.pk}/"' in page
    assert 'data-testid="branch-share"' in page


def test_the_dialog_offers_the_whole_branch_and_its_checkpoints(as_alice, branch):
    say(branch, "q", "a")
    cp = checkpoint_create(branch=branch, name="first answer")
    dialog = as_alice.get(f"/shares/branches/{branch.pk}/", **HX).content.decode()
    assert 'data-testid="share-dialog"' in dialog
    assert "The whole branch as it stands (2 messages)" in dialog
    assert f'<option value="{cp.pk}">Up to “first answer” (2 messages)</option>' in dialog


def test_creating_a_link_shows_its_address_to_copy(as_alice, branch):
    say(branch, "q", "a")
    response = as_alice.post(f"/shares/branches/{branch.pk}/", {"checkpoint": ""}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    found = re.search(r'data-testid="share-url" autofocus', html)
    assert found
    address = re.search(r'value="(http://testserver/s/[A-Za-z0-9_-]{43}/)"', html).group(1)
    assert f'data-copy="{address}"' in html
    share = ShareLink.objects.get()
    assert share.message_count == 2
    assert as_alice.get(address.removeprefix("http://testserver")).status_code == 200


def test_a_checkpoint_outside_the_branch_is_said_in_the_dialog(as_alice, alice, branch):
    other = current_branch(session_create(owner=alice, name="other"))
    cp = checkpoint_create(branch=other, name="elsewhere")
    response = as_alice.post(f"/shares/branches/{branch.pk}/", {"checkpoint": cp.pk}, **HX)
    assert response.status_code == 200  # the dialog stays open with the reason
    assert b'data-testid="share-error"' in response.content
    bad = as_alice.post(f"/shares/branches/{branch.pk}/", {"checkpoint": "abc"}, **HX)
    assert b'data-testid="share-error"' in bad.content
    assert not ShareLink.objects.exists()


def test_bob_cannot_share_alices_branch_nor_up_to_her_checkpoint(alice, bob, branch):
    cp = checkpoint_create(branch=branch, name="cp")
    as_bob = browser(bob)
    assert as_bob.get(f"/shares/branches/{branch.pk}/", **HX).status_code == 404
    assert as_bob.post(f"/shares/branches/{branch.pk}/", {}, **HX).status_code == 404
    bobs = current_branch(session_create(owner=bob, name="bob's"))
    mixed = as_bob.post(f"/shares/branches/{bobs.pk}/", {"checkpoint": cp.pk}, **HX)
    assert mixed.status_code == 404
    assert not ShareLink.objects.exists()


def test_the_profile_lists_the_links_with_views_and_deletes_them(as_alice, alice, branch):
    say(branch, "q", "a")
    share, token = share_create(owner=alice, branch=branch)
    as_alice.get(f"/s/{token}/")
    page = as_alice.get("/accounts/profile/").content.decode()
    assert 'data-testid="share-list"' in page
    assert f'data-copy="http://testserver/s/{token}/"' in page
    assert "Python basics" in page
    views = re.search(r'data-testid="share-views">(\d+)', page).group(1)
    assert views == "1"
    response = as_alice.post(f"/shares/{share.pk}/delete/")
    assert response.status_code == 303
    assert response["Location"] == "/accounts/profile/#shares"
    assert as_alice.get(f"/s/{token}/").status_code == 404
    assert b'data-testid="no-shares"' in as_alice.get("/accounts/profile/").content


def test_a_rewind_warns_of_the_links_it_shortens_and_the_profile_says_what_they_show(
    as_alice, alice, session, branch
):
    say(branch, "q1", "a1")
    cp = checkpoint_create(branch=branch, name="cp")
    say(branch, "q2", "a2")
    share_create(owner=alice, branch=branch)  # 4 messages
    share_create(owner=alice, branch=branch, checkpoint=cp)  # 2: a rewind to cp keeps them all

    dialog = as_alice.get(f"/chat/checkpoints/{cp.pk}/restore/", **HX).content.decode()
    warning = re.search(r'data-testid="rewind-shares">([^<]*)<', dialog)
    assert warning is not None
    assert warning.group(1) == (
        "1 live share link of this branch will show only the messages up to this checkpoint."
    )

    as_alice.post(f"/chat/checkpoints/{cp.pk}/restore/", {"mode": "rewind"}, **HX)
    branch.refresh_from_db()
    say(branch, "q3", "a3")  # as long as before, rewritten: the link still shows 2
    profile = as_alice.get("/accounts/profile/").content.decode()
    shown = [
        " ".join(t.split()) for t in re.findall(r'data-testid="share-shown">(.*?)</span>', profile)
    ]
    assert shown == [
        "2 messages",
        "2 messages (a rewind removed the rest of the 4 shared)",
    ]  # newest first
    # Nothing later on the branch: no warning.
    dialog = as_alice.get(f"/chat/checkpoints/{cp.pk}/restore/", **HX).content.decode()
    assert 'data-testid="rewind-shares"' not in dialog


def test_a_rewind_warns_of_the_links_of_the_branches_it_deletes(as_alice, alice, session, branch):
    say(branch, "q1", "a1")
    cp = checkpoint_create(branch=branch, name="cp")
    say(branch, "q2", "a2")
    later = checkpoint_create(branch=branch, name="later")
    checkpoint_restore(checkpoint=later, mode="branch")  # a branch forked after cp
    share_create(owner=alice, branch=current_branch(session))

    dialog = as_alice.get(f"/chat/checkpoints/{cp.pk}/restore/", **HX).content.decode()

    warning = re.search(r'data-testid="rewind-shares">([^<]*)<', dialog)
    assert warning is not None
    assert warning.group(1) == "1 share link of the branches it deletes will open nothing."


def test_bob_cannot_delete_alices_link(alice, bob, branch):
    share, _ = share_create(owner=alice, branch=branch)
    response = browser(bob).post(f"/shares/{share.pk}/delete/")
    assert response.status_code == 404
    assert ShareLink.objects.filter(pk=share.pk).exists()
    assert b"share-row" not in browser(bob).get("/accounts/profile/").content


def test_names_on_the_profile_list_are_inert(as_alice, alice):
    for name in NAMES[:20]:
        branch = current_branch(session_create(owner=alice, name=name))
        cp = checkpoint_create(branch=branch, name=name)
        share_create(owner=alice, branch=branch, checkpoint=cp)
    assert_inert(as_alice.get("/accounts/profile/").content, "the profile's links", NAMES[:20])
