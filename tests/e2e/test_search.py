"""Search in Chromium (issue 25), at 1366 and 390 pixels wide, in the light and the dark scheme:
the sidebar's search matches the start of a word and shows a snippet; opening it shows the
message in its place (far back in a long history, in view, marked, with "Load later"); the
search inside a conversation does the same; axe finds no serious or critical violation with the
new controls open."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import (
    FINISHED_ASSISTANT,
    USER_MESSAGE,
    new_session,
    send_message,
    sign_up,
    wait_turn_done,
)
from .test_accessibility import violations

pytestmark = pytest.mark.e2e

HISTORY = 600
FAR_BACK = 30  # the message looked for: 570 after it, 6 pages back
SEED = (
    "from sessions_app.models import Branch, Message; "
    "b = Branch.objects.get(session_id={sid}); "
    "Message.objects.bulk_create([Message(branch=b, position=i, "
    "role='user' if i % 2 == 0 else 'assistant', "
    "content='the zebrafish <b>restoration</b> plan' if i == {far} else f'message {{i}}') "
    "for i in range({n})]); "
    "Branch.objects.filter(pk=b.pk).update(message_count={n})"
)
FORK = (
    "from sessions_app.models import Branch; "
    "from sessions_app.services import branch_fork; "
    "branch_fork(branch=Branch.objects.get(session_id={sid}), position=10)"
)
IN_VIEW = """() => {
    const target = document.querySelector("#messages .message-target");
    if (!target) return false;
    const box = document.getElementById("messages").getBoundingClientRect();
    const at = target.getBoundingClientRect();
    return at.top >= box.top - 1 && at.top < box.bottom && at.bottom > box.top;
}"""
# The new controls stay inside the window (the top bar's own overflow is another item's).
INSIDE = """(selector) => {
    const r = document.querySelector(selector).getBoundingClientRect();
    return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth;
}"""


def _open_sidebar_if_narrow(page, width: int) -> None:
    if width < 700:
        page.get_by_test_id("toggle-sidebar").click()
        expect(page.get_by_test_id("session-search")).to_be_visible()


def _assert_target_shown(page) -> None:
    target = page.locator("#messages .message-target")
    expect(target).to_have_count(1)
    expect(target).to_contain_text("the zebrafish <b>restoration</b> plan")  # as text, no HTML
    page.wait_for_function(IN_VIEW)
    expect(page.get_by_test_id("load-later")).to_be_visible()
    expect(
        page.locator("#messages [data-testid=message]").filter(has_text="message 599")
    ).to_have_count(0)


@pytest.mark.parametrize(("width", "height"), [(1366, 800), (390, 844)])
def test_a_search_hit_opens_its_message_in_place(page, app, app_settings, llm, width, height):
    sign_up(page, app.base_url, prefix="search")
    sid = new_session(page)
    app.manage(app_settings, "shell", "-c", SEED.format(sid=sid, far=FAR_BACK, n=HISTORY))
    page.set_viewport_size({"width": width, "height": height})
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.goto(f"{app.base_url}/chat/{sid}/")

        # The sidebar: the start of a word finds the message; its snippet marks the match.
        _open_sidebar_if_narrow(page, width)
        page.get_by_test_id("session-search").fill("zebraf restorat")
        snippet = page.get_by_test_id("search-snippet")
        expect(snippet).to_have_count(1)
        expect(snippet.locator("mark")).to_have_text(["zebrafish", "restoration"])
        expect(snippet).to_contain_text("<b>restoration</b>")
        assert page.evaluate(INSIDE, "[data-testid=search-snippet]")
        assert violations(page) == [], scheme
        with page.expect_navigation():
            snippet.click()
        found = re.search(r"\?message=(\d+)$", page.url)
        assert found
        target = int(found.group(1))
        _assert_target_shown(page)
        assert page.evaluate(INSIDE, "#messages .message-target")

        # Load later: the next page comes below.
        page.get_by_test_id("load-later").click()
        expect(
            page.locator("#messages [data-testid=message]").filter(has_text="message 179")
        ).to_have_count(1)

        # The search inside the conversation.
        page.get_by_test_id("conversation-search-toggle").click()
        field = page.get_by_test_id("conversation-search-input")
        expect(field).to_be_focused()
        field.fill("zebr")
        hit = page.get_by_test_id("conversation-hit")
        expect(hit).to_have_count(1)
        expect(hit.locator("mark")).to_have_text("zebrafish")
        assert page.evaluate(INSIDE, ".conv-search-panel")
        assert violations(page) == [], scheme
        field.fill("?!")
        expect(page.get_by_test_id("conversation-search-error")).to_contain_text(
            "no letter or digit"
        )
        field.fill("zebr")
        expect(hit).to_have_count(1)
        with page.expect_navigation():
            hit.click()
        _assert_target_shown(page)
        # Esc closes the search again.
        page.get_by_test_id("conversation-search-toggle").click()
        page.keyboard.press("Escape")
        expect(page.get_by_test_id("conversation-search-input")).to_be_hidden()

    # Sent from a history opened around a message: the message comes into view at the end, and
    # the turn's end brings the latest page.
    llm.queue(Reply("an answer at the end"))
    before = send_message(page, "a question at the end")
    mine = page.locator(USER_MESSAGE).filter(has_text="a question at the end")
    expect(mine).to_be_in_viewport()
    wait_turn_done(page, before)
    expect(page.locator(FINISHED_ASSISTANT).last).to_contain_text("an answer at the end")
    expect(page.get_by_test_id("load-later")).to_have_count(0)
    expect(page.locator(USER_MESSAGE).filter(has_text="message 598")).to_have_count(1)

    # A message left on another branch: that branch opens read-only at its own address, the
    # message in its place, nothing switched; "Continue here" makes it the current branch.
    app.manage(app_settings, "shell", "-c", FORK.format(sid=sid))
    page.goto(f"{app.base_url}/chat/{sid}/?message={target}")
    assert re.search(rf"/chat/{sid}/branches/\d+/\?message={target}$", page.url), page.url
    expect(page.get_by_test_id("read-banner")).to_contain_text("You are reading the branch")
    read = page.locator("#messages .message-target")
    expect(read).to_contain_text("the zebrafish <b>restoration</b> plan")
    page.wait_for_function(IN_VIEW)
    expect(page.get_by_test_id("message-input")).to_have_count(0)
    expect(page.get_by_test_id("regenerate")).to_have_count(0)
    expect(page.get_by_test_id("read-later")).to_be_visible()
    assert violations(page) == []
    with page.expect_navigation():
        page.get_by_test_id("continue-here").click()
    assert page.url.endswith(f"/chat/{sid}/?message={target}")
    _assert_target_shown(page)
    expect(page.get_by_test_id("message-input")).to_be_visible()
