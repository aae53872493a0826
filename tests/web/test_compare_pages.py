"""The compare view: two points side by side from where they part, the shared length stated,
the session state's and the files' differences (escaped), at most SIDE_SHOWN messages a side;
the panel's picker and the branch tree's "compare with the branch I came from"; bad refs are a
400 on the page, another session's or user's points a 404."""

from __future__ import annotations

import html
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import Branch
from sessions_app.services import branch_set_state, message_append, session_create
from tests.conftest import grow, say
from web.pages.compare import PICKER_CHECKPOINTS, SIDE_SHOWN
from workspace.services import file_write

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def parted(session, branch):
    say(branch, "q1", "a1", "q2", "a2")
    branch_set_state(branch=branch, session_state={"topic": "python"})
    file_write(branch=branch, path="plan.md", content="step 1\nstep 2\n")
    cp = checkpoint_create(branch=branch, name="before")
    say(branch, "old question", "old answer")
    new = checkpoint_restore(checkpoint=cp, mode="branch").branch
    message_append(branch=new, role="user", content="<script>alert('user')</script> new question")
    message_append(
        branch=new,
        role="assistant",
        content="**bold** <img src=x onerror=alert('reply')> [link](javascript:alert(1))",
    )
    branch_set_state(branch=new, session_state={"topic": "<b>rust</b>", "level": 1})
    file_write(branch=new, path="plan.md", content="step 1\n<script>alert(2)</script>\n")
    file_write(branch=new, path="src/<img onerror=x>.py", content="x = 1\n")
    branch.refresh_from_db()
    new.refresh_from_db()
    return {"main": branch, "new": new, "cp": cp}


def _url(session, source: str = "", target: str = "") -> str:
    url = reverse("chat:compare", args=[session.pk])
    if source or target:
        url += f"?from={source}&to={target}"
    return url


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_page_shows_both_sides_from_where_they_part(as_alice, session, parted):
    main, new = parted["main"], parted["new"]
    response = as_alice.get(_url(session, f"branch:{main.pk}", f"branch:{new.pk}"))
    assert response.status_code == 200
    page = response.content.decode()
    text = _text(page)
    assert "4 messages in common" in text
    sides = re.split(r'data-testid="compare-side-to"', page)
    assert "old question" in sides[0]
    assert "old answer" in sides[0]
    assert "new question" in sides[1]
    assert "q1" not in text  # the shared part is not repeated
    assert "2 messages after the shared part" in text
    # The state and files differences.
    assert 'data-status="added"' in page
    assert "level" in text
    assert "&lt;b&gt;rust&lt;/b&gt;" in page
    assert 'data-path="plan.md"' in page
    assert '<span class="del">-step 2</span>' in page
    assert '<span class="add">+&lt;script&gt;alert(2)&lt;/script&gt;</span>' in page


def test_the_sides_swap_with_one_link(as_alice, session, parted):
    main, new = parted["main"], parted["new"]
    page = as_alice.get(_url(session, f"branch:{main.pk}", f"branch:{new.pk}")).content.decode()
    swap = re.search(r'href="([^"]+)" data-testid="compare-swap"', page).group(1)
    assert html.unescape(swap) == _url(session, f"branch:{new.pk}", f"branch:{main.pk}")
    swapped = _text(as_alice.get(html.unescape(swap)).content.decode())
    assert "From: Branch from “before”" in swapped


def test_everything_shown_is_escaped_or_sanitised(as_alice, session, parted):
    main, new = parted["main"], parted["new"]
    page = as_alice.get(_url(session, f"branch:{main.pk}", f"branch:{new.pk}")).content.decode()
    assert "<script>alert" not in page
    assert not re.search(r"<img[^>]*onerror", page)
    assert not re.search(r"href=[\"']?javascript:", page)
    assert "&lt;img src=x onerror=alert" in page  # shown as text, like the chat shows it
    assert "<strong>bold</strong>" in page  # the chat's own markdown rendering
    assert "&lt;img onerror=x&gt;" in page  # a file's path


def test_the_chats_message_actions_are_not_on_the_compare_page(as_alice, session, parted):
    main, new = parted["main"], parted["new"]
    page = as_alice.get(_url(session, f"branch:{main.pk}", f"branch:{new.pk}")).content.decode()
    assert 'data-testid="edit-message"' not in page
    assert 'data-testid="regenerate"' not in page


def test_a_checkpoint_against_its_branch(as_alice, session, parted):
    main, cp = parted["main"], parted["cp"]
    page = as_alice.get(_url(session, f"checkpoint:{cp.pk}", f"branch:{main.pk}")).content
    text = _text(page.decode())
    assert "From: Checkpoint “before”" in text
    assert "Nothing after the shared part." in text
    assert "old question" in text


def test_the_same_point_on_both_sides_says_plainly_that_nothing_differs(as_alice, session, parted):
    ref = f"branch:{parted['main'].pk}"
    page = as_alice.get(_url(session, ref, ref)).content.decode()
    text = _text(page)
    assert "These are the same point: nothing differs." in text
    assert "part after" not in text
    assert 'data-testid="compare-sides"' not in page
    assert 'data-testid="compare-swap"' not in page


def test_two_points_holding_the_same_history_do_not_say_they_part(as_alice, session, branch):
    say(branch, "q1", "a1")
    cp = checkpoint_create(branch=branch, name="at the end")
    text = _text(
        as_alice.get(_url(session, f"checkpoint:{cp.pk}", f"branch:{branch.pk}")).content.decode()
    )
    assert "2 messages in common." in text
    assert "part after" not in text
    assert "These two points hold the same conversation" in text


def test_without_refs_a_branch_made_from_none_is_compared_with_its_newest_checkpoint(
    as_alice, session, branch
):
    say(branch, "q1", "a1")
    checkpoint_create(branch=branch, name="first")
    say(branch, "q2", "a2")
    newest = checkpoint_create(branch=branch, name="second")
    say(branch, "q3", "a3")
    page = as_alice.get(_url(session)).content.decode()
    source = re.search(r'name="from".*?</select>', page, re.S).group(0)
    target = re.search(r'name="to".*?</select>', page, re.S).group(0)
    assert f'value="branch:{branch.pk}" selected' in target
    assert f'value="checkpoint:{newest.pk}" selected' in source
    assert f'value="branch:{branch.pk}" selected' not in source
    # The form as it comes compares two points that part.
    chosen = as_alice.get(_url(session, f"checkpoint:{newest.pk}", f"branch:{branch.pk}"))
    chosen = _text(chosen.content.decode())
    assert "4 messages in common; they part after that." in chosen


def test_without_refs_the_picker_chooses_the_current_branch_and_its_parent(
    as_alice, session, parted
):
    main, new = parted["main"], parted["new"]
    response = as_alice.get(_url(session))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-testid="compare-summary"' not in page
    source = re.search(r'name="from".*?</select>', page, re.S).group(0)
    target = re.search(r'name="to".*?</select>', page, re.S).group(0)
    assert f'value="branch:{main.pk}" selected' in source
    assert f'value="branch:{new.pk}" selected' in target
    assert f'value="checkpoint:{parted["cp"].pk}"' in source


@pytest.mark.parametrize(
    "query", ["?from=main&to=branch:1", "?from=branch:1", "?to=checkpoint:x", "?from=a:1&to=b:2"]
)
def test_a_ref_that_does_not_parse_is_a_400_with_the_picker_still_there(
    as_alice, session, parted, query
):
    response = as_alice.get(_url(session) + query)
    assert response.status_code == 400
    page = response.content.decode()
    assert 'data-testid="compare-error"' in page
    assert "branch:&lt;id&gt; or checkpoint:&lt;id&gt;" in page
    assert 'data-testid="compare-form"' in page


def test_a_point_of_another_session_is_a_404(as_alice, alice, session, parted):
    other = session_create(owner=alice, name="other")
    other_branch = Branch.objects.get(session=other, is_current=True)
    response = as_alice.get(
        _url(session, f"branch:{parted['main'].pk}", f"branch:{other_branch.pk}")
    )
    assert response.status_code == 404


def test_bob_is_refused_alices_compare_page_and_picker(client, bob, session, parted):
    client.force_login(bob)
    main, new = parted["main"], parted["new"]
    assert client.get(_url(session, f"branch:{main.pk}", f"branch:{new.pk}")).status_code == 404
    assert client.get(reverse("chat:compare_points", args=[session.pk])).status_code == 404
    bobs = session_create(owner=bob, name="bob's")
    response = client.get(_url(bobs, f"branch:{main.pk}", f"branch:{new.pk}"))
    assert response.status_code == 404
    assert "old question" not in response.content.decode()


def test_a_visitor_who_is_not_signed_in_is_sent_to_log_in(client, session, parted):
    response = client.get(
        _url(session, f"branch:{parted['main'].pk}", f"branch:{parted['main'].pk}")
    )
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_a_long_side_shows_its_first_messages_with_a_note(as_alice, session, branch):
    say(branch, "start")
    cp = checkpoint_create(branch=branch, name="start")
    grow(branch, SIDE_SHOWN + 50)
    new = checkpoint_restore(checkpoint=cp, mode="branch").branch
    say(new, "other way")
    page = as_alice.get(_url(session, f"branch:{branch.pk}", f"branch:{new.pk}")).content.decode()
    source = page.split('data-testid="compare-side-to"')[0]
    assert source.count('data-testid="message"') == SIDE_SHOWN
    text = _text(source)
    assert (
        f"{SIDE_SHOWN + 50} messages after the shared part: the first {SIDE_SHOWN} are shown"
        in text
    )
    assert f"message {SIDE_SHOWN}:" not in text
    assert f"message {SIDE_SHOWN}" not in text.split()


def test_the_panel_offers_the_picker_and_its_lists_arrive_when_opened(as_alice, session, parted):
    chat = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    points_url = reverse("chat:compare_points", args=[session.pk])
    assert 'data-testid="compare-picker"' in chat
    assert f'hx-get="{points_url}"' in chat
    form = as_alice.get(points_url, HTTP_HX_REQUEST="true").content.decode()
    assert 'data-testid="compare-from"' in form
    assert 'data-testid="compare-to"' in form
    assert f'value="branch:{parted["main"].pk}"' in form
    assert f'value="checkpoint:{parted["cp"].pk}"' in form
    assert 'id="compare-from-panel"' in form


def test_a_restored_branch_in_the_tree_links_to_the_comparison_with_its_parent(
    as_alice, session, parted
):
    main, new = parted["main"], parted["new"]
    chat = html.unescape(as_alice.get(reverse("chat:session", args=[session.pk])).content.decode())
    links = re.findall(r'<a class="compare-link" href="([^"]+)"', chat)
    assert links == [f"{_url(session)}?from=branch:{main.pk}&to=branch:{new.pk}"]
    assert "Compare with the branch I came from" in chat


def _page_queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured.captured_queries)


def test_the_page_costs_the_same_queries_at_10_and_10_000_messages(as_alice, alice):
    costs = []
    for n in (10, 10_000):
        s = session_create(owner=alice, name=f"{n}")
        main = Branch.objects.get(session=s, is_current=True)
        say(main, "start")
        cp = checkpoint_create(branch=main, name="start")
        grow(main, n)
        new = checkpoint_restore(checkpoint=cp, mode="branch").branch
        grow(new, n)
        costs.append(_page_queries(as_alice, _url(s, f"branch:{main.pk}", f"branch:{new.pk}")))
    assert costs[0] == costs[1]


def test_each_side_opens_in_the_conversation_at_its_first_message(as_alice, session, parted):
    main, new = parted["main"], parted["new"]
    page = as_alice.get(_url(session, f"branch:{main.pk}", f"branch:{new.pk}")).content.decode()
    first = new.messages.order_by("position").first()
    chat = reverse("chat:session", args=[session.pk])
    assert f'href="{chat}?message={first.pk}" data-testid="side-open"' in page


def test_a_checkpoint_older_than_the_pickers_list_is_still_shown_as_chosen(
    as_alice, session, branch
):
    say(branch, "q", "a")
    old = checkpoint_create(branch=branch, name="oldest")
    for _ in range(PICKER_CHECKPOINTS):
        checkpoint_create(branch=branch, name="later", is_auto=True)
    page = as_alice.get(_url(session, f"checkpoint:{old.pk}", f"branch:{branch.pk}")).content
    source = re.search(r'name="from".*?</select>', page.decode(), re.S).group(0)
    assert f'value="checkpoint:{old.pk}" selected' in source
    assert "the newest" in source
