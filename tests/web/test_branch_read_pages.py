"""Reading another branch without switching to it (issue 39, item 13): a search hit, a marker or
a compared point on another branch opens that branch read-only at its own address, with
"Continue here" to make it current; nothing changes for any tab until it is pressed."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from checkpoints.services import checkpoint_create
from sessions_app.models import Branch, Message, Session
from sessions_app.selectors import current_branch
from sessions_app.services import branch_fork, session_create
from tests.conftest import grow, say

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def forked(session: Session, branch: Branch) -> tuple[Session, Branch, Branch]:
    """Alice's session: "main" with four messages, and a fork after the first two (current)
    that went another way."""
    say(branch, "first question", "first answer", "abandoned question", "abandoned answer")
    branch.refresh_from_db()
    fork = branch_fork(branch=branch, position=2)
    say(fork, "the road taken", "its answer")
    return session, branch, fork


def _read(session: Session, branch: Branch) -> str:
    return reverse("chat:branch_read", args=[session.pk, branch.pk])


def _continue(session: Session, branch: Branch) -> str:
    return reverse("chat:branch_continue", args=[session.pk, branch.pk])


def _messages(html: str) -> str:
    return html[html.index('id="messages"') :]


def test_the_read_view_shows_the_branchs_messages_and_not_the_current_ones(as_alice, forked):
    session, main, fork = forked
    response = as_alice.get(_read(session, main))
    assert response.status_code == 200
    shown = _messages(response.content.decode())
    assert "abandoned question" in shown
    assert "abandoned answer" in shown
    assert "first question" in shown  # its history, inherited parts included
    assert "the road taken" not in shown
    # Reading it switched nothing.
    assert current_branch(session).pk == fork.pk


def test_the_read_view_has_the_banner_and_no_composer_or_controls(as_alice, forked):
    session, main, _ = forked
    body = as_alice.get(_read(session, main)).content.decode()
    assert "You are reading the branch “main” (not the current one)." in body
    assert 'data-testid="continue-here"' in body
    assert f'action="{_continue(session, main)}"' in body
    assert f'href="{reverse("chat:session", args=[session.pk])}" data-testid="back-to-current"' in (
        body
    )
    for control in (
        'data-testid="message-input"',
        'id="composer"',
        'data-testid="edit-message"',
        'data-testid="regenerate"',
        'data-testid="continue"',
        'data-testid="feedback',
        'data-testid="versions"',
        "ws-connect",
        "/send/",
    ):
        assert control not in body, control


def test_continue_here_makes_the_branch_current_and_opens_the_chat_page(as_alice, forked):
    session, main, fork = forked
    target = Message.objects.get(content="abandoned question")
    as_alice.get(_read(session, main), {"message": target.pk})
    assert current_branch(session).pk == fork.pk  # not before it is pressed
    response = as_alice.post(_continue(session, main), {"message": str(target.pk)})
    assert response.status_code == 302
    assert response["Location"] == f"/chat/{session.pk}/?message={target.pk}"
    assert current_branch(session).pk == main.pk
    body = as_alice.get(response["Location"]).content.decode()
    assert f'data-target-message="{target.pk}"' in body
    assert 'data-testid="message-input"' in body


def test_continue_here_is_a_post(as_alice, forked):
    session, main, fork = forked
    assert as_alice.get(_continue(session, main)).status_code == 405
    assert current_branch(session).pk == fork.pk


def test_a_search_hit_on_another_branch_opens_the_read_view_at_it(as_alice, forked):
    session, main, fork = forked
    hit = Message.objects.get(content="abandoned answer")  # the newest that matches
    # The sidebar's search links the hit to the chat page, which sends it to the read view.
    listed = as_alice.get(reverse("chat:session_list"), {"q": "abandoned"}, **HX)
    link = f"/chat/{session.pk}/?message={hit.pk}"
    assert f'href="{link}"' in listed.content.decode()
    response = as_alice.get(link)
    assert response.status_code == 302
    assert response["Location"] == f"{_read(session, main)}?message={hit.pk}"
    assert current_branch(session).pk == fork.pk
    body = as_alice.get(response["Location"]).content.decode()
    assert f'data-target-message="{hit.pk}"' in body
    assert 'data-testid="show-on-branch"' not in body
    assert "Switch to its branch" not in body


def test_a_checkpoint_on_another_branch_opens_the_read_view_at_its_marker(as_alice, forked):
    session, main, fork = forked
    cp = checkpoint_create(branch=main, name="on main")  # after message 4 of main
    main.refresh_from_db()
    # The panel's "Show" link, and a marker's: the chat page around the checkpoint.
    panel = as_alice.get(reverse("chat:checkpoint_list", args=[session.pk])).content.decode()
    link = f"/chat/{session.pk}/?checkpoint={cp.pk}"
    assert f'href="{link}"' in panel
    response = as_alice.get(link)
    assert response.status_code == 302
    assert response["Location"] == f"{_read(session, main)}?checkpoint={cp.pk}"
    body = as_alice.get(response["Location"]).content.decode()
    assert f'data-target-checkpoint="{cp.pk}"' in body
    assert f'id="checkpoint-marker-{cp.pk}"' in body
    assert "Switch to its branch" not in body
    # Continue here keeps the checkpoint in view on the chat page.
    response = as_alice.post(_continue(session, main), {"checkpoint": str(cp.pk)})
    assert response["Location"] == f"/chat/{session.pk}/?checkpoint={cp.pk}"
    assert current_branch(session).pk == main.pk
    assert fork.pk != main.pk


def test_the_compare_pages_link_to_another_branch_opens_the_read_view(as_alice, forked):
    session, main, fork = forked
    on_main = checkpoint_create(branch=main, name="main end")
    on_fork = checkpoint_create(branch=fork, name="fork end")
    url = reverse("chat:compare", args=[session.pk])
    body = as_alice.get(
        url, {"from": f"checkpoint:{on_fork.pk}", "to": f"checkpoint:{on_main.pk}"}
    ).content
    links = re.findall(r'href="([^"]+)" data-testid="side-open"', body.decode())
    assert links, "the compare page links each side to the conversation"
    abandoned = Message.objects.get(content="abandoned question")
    to_main = f"/chat/{session.pk}/?message={abandoned.pk}"
    assert to_main in links
    response = as_alice.get(to_main)
    assert response["Location"] == f"{_read(session, main)}?message={abandoned.pk}"


def test_the_chat_page_still_shows_points_on_the_current_branch_in_place(as_alice, forked):
    session, _, fork = forked
    here = Message.objects.get(content="the road taken")
    inherited = Message.objects.get(content="first question")
    cp = checkpoint_create(branch=fork, name="on the fork")
    for query, marked in (
        (f"?message={here.pk}", f'data-target-message="{here.pk}"'),
        (f"?message={inherited.pk}", f'data-target-message="{inherited.pk}"'),
        (f"?checkpoint={cp.pk}", f'data-target-checkpoint="{cp.pk}"'),
    ):
        response = as_alice.get(f"/chat/{session.pk}/{query}")
        assert response.status_code == 200, query
        assert marked in response.content.decode()
    assert current_branch(session).pk == fork.pk


def test_the_current_branchs_read_address_is_the_chat_page(as_alice, forked):
    session, _, fork = forked
    here = Message.objects.get(content="the road taken")
    response = as_alice.get(_read(session, fork), {"message": here.pk})
    assert response.status_code == 302
    assert response["Location"] == f"/chat/{session.pk}/?message={here.pk}"


def test_bob_gets_404_on_alices_read_view_and_continue_here(client, bob, forked):
    session, main, fork = forked
    client.force_login(bob)
    assert client.get(_read(session, main)).status_code == 404
    assert client.post(_continue(session, main)).status_code == 404
    # Nor through a session of his own.
    his = session_create(owner=bob, name="Bob's")
    assert client.get(_read(his, main)).status_code == 404
    assert client.post(_continue(his, main)).status_code == 404
    assert current_branch(session).pk == fork.pk


def test_a_branch_of_another_session_is_404(as_alice, alice, forked):
    session, main, fork = forked
    other = session_create(owner=alice, name="Other")
    others = current_branch(other)
    assert as_alice.get(_read(session, others)).status_code == 404
    assert as_alice.post(_continue(session, others)).status_code == 404
    assert as_alice.get(_read(other, main)).status_code == 404
    assert as_alice.post(_continue(other, main)).status_code == 404
    assert current_branch(session).pk == fork.pk
    assert current_branch(other).pk == others.pk


def test_bad_ids_are_404(as_alice, alice, bob, forked):
    session, main, fork = forked
    base = f"/chat/{session.pk}/branches/"
    for url in (
        f"{base}abc/",
        f"{base}-1/",
        f"{base}99999999/",
        f"/chat/99999999/branches/{main.pk}/",
    ):
        assert as_alice.get(url).status_code == 404, url
        assert as_alice.post(url + "continue/").status_code == 404, url
    on_fork = Message.objects.get(content="the road taken")  # not in main's history
    theirs = session_create(owner=bob, name="Bob's")
    say(current_branch(theirs), "bob's words")
    bobs = Message.objects.get(content="bob's words")
    read = _read(session, main)
    for query in (
        {"message": "abc"},
        {"message": "99999999"},
        {"message": str(on_fork.pk)},
        {"message": str(bobs.pk)},
        {"checkpoint": "x"},
        {"checkpoint": "99999999"},
        {"before": "abc"},
        {"after": "-1"},
    ):
        response = as_alice.get(read, query)
        assert response.status_code == 404, query
        assert "bob's words" not in response.content.decode()
    assert current_branch(session).pk == fork.pk


def test_a_long_branch_is_read_a_page_at_a_time_around_its_point(as_alice, session, branch):
    grow(branch, 400)
    branch.refresh_from_db()
    branch_fork(branch=branch, position=10)
    target = Message.objects.get(branch=branch, position=150)
    read = _read(session, branch)
    body = as_alice.get(read, {"message": target.pk}).content.decode()
    assert f'data-target-message="{target.pk}"' in body
    positions = [int(p) for p in re.findall(r'data-position="(\d+)"', body)]
    assert (positions[0], positions[-1]) == (100, 199)
    assert f'href="{read}?before=100"' in body
    assert f'href="{read}?after=200"' in body
    # The page before it, and the one after it, of this same read view.
    earlier = as_alice.get(read, {"before": 100}).content.decode()
    positions = [int(p) for p in re.findall(r'data-position="(\d+)"', earlier)]
    assert (positions[0], positions[-1]) == (0, 99)
    assert "?before=" not in earlier
    later = as_alice.get(read, {"after": 200}).content.decode()
    positions = [int(p) for p in re.findall(r'data-position="(\d+)"', later)]
    assert (positions[0], positions[-1]) == (200, 299)
    assert f'href="{read}?after=300"' in later
    # Without a point: its latest page.
    latest = as_alice.get(read).content.decode()
    positions = [int(p) for p in re.findall(r'data-position="(\d+)"', latest)]
    assert (positions[0], positions[-1]) == (300, 399)
    assert 'data-testid="read-later"' not in latest
