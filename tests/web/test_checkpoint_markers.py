"""Checkpoint markers in the conversation (issue 26, item 2): where each checkpoint of the shown
history sits, in every window of messages the page loads, at the same cost at any length; and a
checkpoint of the panel opened in its place."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create, checkpoint_delete
from sessions_app.models import Branch, Message, Session
from sessions_app.selectors import current_branch
from sessions_app.services import branch_activate, branch_fork, session_create
from tests.conftest import grow, say
from web.places import CHECKPOINT_GONE
from web.ws.consumers import render_event

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
MARKER = re.compile(r'id="checkpoint-marker-(\d+)"')
MESSAGE = re.compile(r'id="msg-(\d+)"')


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def _page(client, session: Session, query: str = "") -> str:
    response = client.get(reverse("chat:session", args=[session.pk]) + query)
    assert response.status_code == 200
    return response.content.decode()


def _conversation(html: str) -> str:
    """The conversation's part of a page (not the panel, which lists every checkpoint)."""
    return html.split('id="side-panel"')[0]


def _sequence(html: str) -> list[str]:
    """The messages and markers of a page in their order: "m<position>" and "c<checkpoint id>"."""
    positions = dict(Message.objects.values_list("pk", "position"))
    found = []
    for match in re.finditer(r'id="(msg|checkpoint-marker)-(\d+)"', html):
        kind, pk = match.group(1), int(match.group(2))
        found.append(f"m{positions[pk]}" if kind == "msg" else f"c{pk}")
    return found


def _at(branch: Branch, count: int, name: str, **kwargs) -> Checkpoint:
    return checkpoint_create(branch=branch, name=name, at=count, **kwargs)


def test_a_marker_follows_the_message_its_checkpoint_counts(as_alice, session, branch):
    say(branch, "one", "two", "three", "four")
    cp = _at(branch, 2, "after two")
    html = _page(as_alice, session)
    assert _sequence(html) == ["m0", "m1", f"c{cp.pk}", "m2", "m3"]
    marker = html[html.index(f'id="checkpoint-marker-{cp.pk}"') :]
    marker = marker[: marker.index("</div>")]
    assert 'role="group"' in marker
    assert f'aria-labelledby="checkpoint-marker-{cp.pk}-label"' in marker
    assert "Checkpoint “" in marker
    assert 'title="after two"' in marker
    assert ">manual<" in marker
    assert "<time datetime=" in marker


def test_a_checkpoint_at_no_messages_sits_at_the_top_even_of_an_empty_conversation(
    as_alice, session, branch
):
    start = _at(branch, 0, "blank slate")
    assert _sequence(_page(as_alice, session)) == [f"c{start.pk}"]
    say(branch, "hello", "hi")
    end = checkpoint_create(branch=branch, name="greeted", is_auto=True)
    html = _page(as_alice, session)
    assert _sequence(html) == [f"c{start.pk}", "m0", "m1", f"c{end.pk}"]
    assert ">auto<" in html


def test_a_branch_shows_its_ancestors_checkpoints_within_the_shared_part_only(
    as_alice, session, branch
):
    say(branch, "a", "b", "c", "d", "e", "f")
    shared = _at(branch, 2, "shared")
    at_fork = _at(branch, 3, "at the fork")
    past = _at(branch, 5, "past the fork")
    fork = branch_fork(branch=branch, position=3)
    say(fork, "x", "y")
    own = checkpoint_create(branch=fork, name="own")
    sibling = branch_fork(branch=branch, position=3, make_current=False)
    say(sibling, "elsewhere")
    checkpoint_create(branch=sibling, name="sibling's")
    html = _page(as_alice, session)
    assert _sequence(html) == [
        "m0",
        "m1",
        f"c{shared.pk}",
        "m2",
        f"c{at_fork.pk}",
        "m3",
        "m4",
        f"c{own.pk}",
    ]
    assert f"checkpoint-marker-{past.pk}" not in html
    assert "sibling&#x27;s" not in _conversation(html)


def test_a_checkpoint_name_is_escaped_in_its_marker(as_alice, session, branch):
    say(branch, "hi")
    cp = checkpoint_create(branch=branch, name='<img src=x onerror="alert(1)">')
    html = _page(as_alice, session)
    conversation = _conversation(html)
    assert f"checkpoint-marker-{cp.pk}" in conversation
    assert "<img src=x" not in conversation
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in conversation


@pytest.fixture
def long_chat(alice):
    """300 messages, checkpoints at 10, 100, 150, 200, 250 and 300 messages."""
    chat = session_create(owner=alice, name="Long")
    branch = chat.branches.get()
    grow(branch, 300)
    marks = {n: _at(branch, n, f"at {n}") for n in (10, 100, 150, 200, 250, 300)}
    return chat, marks


def _markers(html: str) -> set[int]:
    return {int(pk) for pk in MARKER.findall(html)}


def test_each_window_of_messages_brings_the_markers_that_sit_in_it(as_alice, long_chat):
    chat, marks = long_chat
    ids = {n: cp.pk for n, cp in marks.items()}
    # The latest page: messages 200 to 299; the checkpoint at 200 follows message 199.
    latest = _page(as_alice, chat)
    assert _markers(latest) == {ids[250], ids[300]}
    # "Load earlier": messages 100 to 199, with the checkpoints at 101 to 200.
    earlier = as_alice.get(f"/chat/{chat.pk}/messages/?before=200", **HX).content.decode()
    assert _markers(earlier) == {ids[150], ids[200]}
    assert _sequence(earlier)[-1] == f"c{ids[200]}"
    first = as_alice.get(f"/chat/{chat.pk}/messages/?before=100", **HX).content.decode()
    assert _markers(first) == {ids[10], ids[100]}
    # "Load later" from 100: messages 100 to 199 again, never the one at 100 (shown above them).
    later = as_alice.get(f"/chat/{chat.pk}/messages/later/?after=100", **HX).content.decode()
    assert _markers(later) == {ids[150], ids[200]}
    assert _sequence(later)[0] == "m100"
    # A message opened in its place (?message=): messages 70 to 169.
    target = Message.objects.get(branch__session=chat, position=120)
    around = _page(as_alice, chat, f"?message={target.pk}")
    assert _markers(_conversation(around)) == {ids[100], ids[150]}


def test_the_refresh_a_live_update_fetches_brings_the_latest_markers(as_alice, long_chat):
    chat, marks = long_chat
    branch = current_branch(chat)
    made = checkpoint_create(branch=branch, name="made elsewhere")
    body = as_alice.get(reverse("chat:refresh", args=[chat.pk]), **HX).content.decode()
    assert _sequence(body)[-2:] == [f"c{marks[300].pk}", f"c{made.pk}"]
    checkpoint_delete(checkpoint=made)
    body = as_alice.get(reverse("chat:refresh", args=[chat.pk]), **HX).content.decode()
    assert f"checkpoint-marker-{made.pk}" not in body


def test_a_deleted_checkpoint_is_named_to_the_page_by_its_live_update(session):
    html = render_event(
        session, {"type": "checkpoint.deleted", "session": session.pk, "checkpoints": [7, 12]}
    )
    assert 'data-checkpoints-gone="7 12"' in html
    assert 'data-event="checkpoint.deleted"' in html
    rewound = render_event(
        session,
        {
            "type": "branch.changed",
            "session": session.pk,
            "branch": 3,
            "checkpoint": 2,
            "deleted_checkpoints": [5],
        },
    )
    assert 'data-checkpoints-gone="5"' in rewound
    made = render_event(
        session,
        {
            "type": "checkpoint.created",
            "session": session.pk,
            "checkpoint": 9,
            "branch": 1,
            "name": "x",
            "is_auto": False,
            "message_count": 2,
        },
    )
    assert 'data-event="checkpoint.created"' in made
    assert "data-checkpoints-gone" not in made


# --- The same cost at any length ---------------------------------------------------------------


def _chat_with(alice, messages: int, checkpoints: int) -> Session:
    chat = session_create(owner=alice, name=f"{messages} messages")
    branch = chat.branches.get()
    grow(branch, messages)
    Checkpoint.objects.bulk_create(
        Checkpoint(
            branch=branch, checkpoint_name=f"cp {i}", message_count=messages * i // checkpoints
        )
        for i in range(1, checkpoints + 1)
    )
    return chat


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **HX)
    assert response.status_code == 200
    return len(queries)


def test_markers_cost_the_same_queries_at_10_and_10000_messages_and_1_or_300_checkpoints(
    as_alice, alice
):
    small = _chat_with(alice, 10, 1)
    large = _chat_with(alice, 10_000, 300)
    assert _markers(_page(as_alice, small)), "the small chat shows its marker"
    assert len(_markers(_conversation(_page(as_alice, large)))) == 3  # at 9934, 9967, 10000
    small_cp = Checkpoint.objects.filter(branch__session=small).get()
    large_cps = list(Checkpoint.objects.filter(branch__session=large).order_by("message_count"))
    for url in (
        "/chat/{pk}/",
        "/chat/{pk}/messages/?before=5",
        "/chat/{pk}/messages/later/?after=5",
        "/chat/{pk}/refresh/",
    ):
        assert _queries(as_alice, url.format(pk=small.pk)) == _queries(
            as_alice, url.format(pk=large.pk)
        ), url
    # A checkpoint opened in its place: among the latest messages, or far back (a window).
    opened = "/chat/{pk}/?checkpoint={cp}"
    assert _queries(as_alice, opened.format(pk=small.pk, cp=small_cp.pk)) == _queries(
        as_alice, opened.format(pk=large.pk, cp=large_cps[-1].pk)
    )
    assert _queries(as_alice, opened.format(pk=large.pk, cp=large_cps[0].pk)) == _queries(
        as_alice, opened.format(pk=large.pk, cp=large_cps[150].pk)
    )


# --- A checkpoint of the panel in its place ----------------------------------------------------


def test_the_panel_offers_each_checkpoint_in_the_conversation(as_alice, session, branch):
    say(branch, "hi", "hello")
    cp = checkpoint_create(branch=branch, name="greeted")
    html = _page(as_alice, session)
    link = f'href="/chat/{session.pk}/?checkpoint={cp.pk}" data-show-checkpoint="{cp.pk}"'
    assert link in html
    assert ">Show<" in html
    assert 'aria-label="Show in the conversation"' in html


def test_a_checkpoint_far_back_opens_in_the_history_around_its_marker(as_alice, long_chat):
    chat, marks = long_chat
    cp = marks[100]
    html = _page(as_alice, chat, f"?checkpoint={cp.pk}")
    assert f'data-target-checkpoint="{cp.pk}"' in html
    sequence = _sequence(_conversation(html))
    assert sequence[0] == "m50"
    assert sequence[-2:] == ["m149", f"c{marks[150].pk}"]  # the one at 150 follows message 149
    assert sequence[sequence.index(f"c{cp.pk}") - 1] == "m99"
    assert f"/chat/{chat.pk}/messages/later/?after=150" in html
    assert "Load earlier messages (50 more)" in html


def test_a_checkpoint_among_the_latest_messages_opens_in_the_usual_page(as_alice, long_chat):
    chat, marks = long_chat
    html = _page(as_alice, chat, f"?checkpoint={marks[300].pk}")
    assert f'data-target-checkpoint="{marks[300].pk}"' in html
    assert 'data-testid="load-later"' not in html
    assert _sequence(_conversation(html))[-1] == f"c{marks[300].pk}"


def test_a_checkpoint_on_another_branch_opens_that_branch_read_only_at_its_marker(
    as_alice, session, branch
):
    say(branch, "a", "b", "c", "d")
    later = _at(branch, 4, "on main")
    fork = branch_fork(branch=branch, position=2)
    say(fork, "other")
    response = as_alice.get(f"/chat/{session.pk}/?checkpoint={later.pk}")
    read = reverse("chat:branch_read", args=[session.pk, branch.pk])
    assert response.status_code == 302
    assert response["Location"] == f"{read}?checkpoint={later.pk}"
    html = as_alice.get(response["Location"]).content.decode()
    assert "You are reading the branch “main” (not the current one)." in html
    assert f'data-target-checkpoint="{later.pk}"' in html
    assert current_branch(session).pk == fork.pk
    switch = reverse("chat:branch_continue", args=[session.pk, branch.pk])
    response = as_alice.post(switch, {"checkpoint": later.pk})
    assert response.status_code == 302
    assert response["Location"] == f"/chat/{session.pk}/?checkpoint={later.pk}"
    assert current_branch(session).pk == branch.pk
    assert f'data-target-checkpoint="{later.pk}"' in _page(
        as_alice, session, f"?checkpoint={later.pk}"
    )


def test_a_checkpoint_that_is_gone_or_not_yours_opens_the_latest_page_with_a_notice(
    client, as_alice, session, branch, bob
):
    say(branch, "hi")
    cp = checkpoint_create(branch=branch, name="alice-secret-name")
    bobs = session_create(owner=bob, name="Bob's")
    client.force_login(bob)
    html = _page(client, bobs, f"?checkpoint={cp.pk}")
    assert CHECKPOINT_GONE in html
    assert "alice-secret-name" not in html
    for bad in ("x", "-1", "99999999999999999999", ""):
        assert CHECKPOINT_GONE in _page(client, bobs, f"?checkpoint={bad}")


def test_bob_cannot_switch_alice_to_the_branch_of_her_checkpoint(
    client, alice, bob, session, branch
):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="mark")
    fork = branch_fork(branch=branch, position=1)
    client.force_login(bob)
    response = client.post(reverse("chat:checkpoint_branch", args=[cp.pk]))
    assert response.status_code == 404
    assert current_branch(session).pk == fork.pk
    branch_activate(branch=branch)
