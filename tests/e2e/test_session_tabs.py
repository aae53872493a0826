"""The sessions list across tabs in a real browser, at 1366 and 390 pixels wide, in the light
and the dark scheme: pins on top in every tab, the tab's title following a rename, a session
made or deleted elsewhere, archive state and a message that brings a session back, the sidebar
paging past its first page, the Markdown download; axe on the new controls."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .conftest import (
    keep_session,
    new_session,
    send_message,
    sign_up,
    wait_turn_done,
    wait_ws_open,
)
from .test_accessibility import violations

pytestmark = pytest.mark.e2e

LOOKS = [(1366, "light"), (1366, "dark"), (390, "light"), (390, "dark")]


def entry(page, session_id: int):
    return page.locator(f"#session-{session_id}")


def open_sidebar(page) -> None:
    """The sessions drawer, on a phone; the sidebar is always there on a wide screen."""
    if not page.get_by_test_id("session-list").is_visible():
        page.get_by_test_id("toggle-sidebar").click()
    expect(page.get_by_test_id("session-list")).to_be_visible()


def make_session(page) -> int:
    """Click "+ New session" in the sidebar (the drawer, on a phone), and give the session some
    metadata of its own (through the API), so that the next click makes another instead of
    opening this blank one again."""
    open_sidebar(page)
    session_id = new_session(page)
    keep_session(page, session_id)
    return session_id


def open_page(context, url: str, scheme: str):
    page = context.new_page()
    page.emulate_media(color_scheme=scheme)
    page.goto(url)
    wait_ws_open(page)
    return page


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=[f"{w}-{s}" for w, s in LOOKS])
def test_tabs_stay_true_to_each_other(contexts, app, llm, width, scheme):
    context = contexts.new(viewport={"width": width, "height": 900})
    one = context.new_page()
    one.emulate_media(color_scheme=scheme)
    sign_up(one, app.base_url)
    first = make_session(one)
    second = make_session(one)  # tab one shows the second session
    two = open_page(context, f"{app.base_url}/chat/{first}/", scheme)
    two.on("dialog", lambda dialog: dialog.accept())

    # Pin the second from tab two: on top there, and in tab one without a reload.
    open_sidebar(two)
    entry(two, second).get_by_test_id("pin-session").click()
    expect(two.locator(f"[data-testid=pinned-sessions] #session-{second}")).to_have_count(1)
    expect(one.locator(f"[data-testid=pinned-sessions] #session-{second}")).to_have_count(1)
    expect(entry(two, second).get_by_test_id("unpin-session")).to_have_attribute(
        "aria-label", "Unpin “New session”"
    )
    assert violations(two) == [], json.dumps(violations(two), indent=1)

    # A name being typed in tab one stays while tab two's change (unpinned) updates its list.
    open_sidebar(one)
    entry(one, first).get_by_test_id("rename-session").click()
    field = entry(one, first).get_by_test_id("rename-input")
    field.fill("Trip to Lis")
    entry(two, second).get_by_test_id("unpin-session").click()
    expect(one.locator("[data-testid=pinned-sessions]")).to_have_count(0)
    expect(field).to_have_value("Trip to Lis")

    # Renamed in tab one: tab two (which shows it) has the new name as its title.
    field.fill("Trip to Lisbon")
    field.press("Enter")
    expect(two).to_have_title("Trip to Lisbon · Rollback")
    expect(two.get_by_test_id("session-title")).to_have_text("Trip to Lisbon")
    expect(one).to_have_title(re.compile(r"^New session · Rollback$"))

    # A session made in tab one appears in tab two's sidebar; deleted there, tab one says so.
    third = make_session(one)
    expect(entry(two, third)).to_have_count(1)
    entry(two, third).get_by_test_id("delete-session").click()
    expect(one.get_by_test_id("session-gone")).to_contain_text("deleted")
    expect(entry(two, third)).to_have_count(0)
    assert violations(one) == [], json.dumps(violations(one), indent=1)

    # Archived from tab one: tab two's header says so. A message sent there brings it back,
    # says so, and tab one lists it again.
    one.goto(f"{app.base_url}/chat/{second}/")
    wait_ws_open(one)
    open_sidebar(one)
    entry(one, first).get_by_test_id("archive-session").click()
    expect(entry(one, first)).to_have_count(0)
    expect(two.get_by_test_id("archived-badge")).to_be_visible()
    if width < 600:  # the drawer covers the conversation on a phone
        two.get_by_test_id("close-sidebar").click()
    before = send_message(two, "back to it")
    wait_turn_done(two, before)
    expect(two.get_by_test_id("unarchived-notice")).to_contain_text("back from the archive")
    expect(two.get_by_test_id("archived-badge")).to_have_count(0)
    expect(entry(one, first)).to_have_count(1)

    # Export as Markdown: a .md download of the current branch (behind "⋯" on a phone).
    if width < 700:
        two.get_by_test_id("header-more").click()
    with two.expect_download() as download:
        two.get_by_test_id("export-markdown").click()
    assert download.value.suggested_filename == f"rollback-Trip-to-Lisbon-{first}.md"
    text = Path(download.value.path()).read_text(encoding="utf-8")
    assert "```text\nback to it\n```" in text


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=[f"{w}-{s}" for w, s in LOOKS])
def test_the_sidebar_loads_more_sessions_as_it_scrolls(contexts, app, app_settings, width, scheme):
    context = contexts.new(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.emulate_media(color_scheme=scheme)
    username = sign_up(page, app.base_url)
    make = (
        "from accounts.models import User; from sessions_app.services import session_create; "
        f"u = User.objects.get(username={username!r}); "
        "[session_create(owner=u, name=f'Chat {n:03}') for n in range(65)]"
    )
    app.manage(app_settings, "shell", "-c", make)
    page.goto(f"{app.base_url}/chat/")
    wait_ws_open(page)
    open_sidebar(page)
    sessions = page.locator("#session-list [data-testid=session]")
    expect(sessions).to_have_count(50)
    more = page.get_by_test_id("more-sessions")
    more.scroll_into_view_if_needed()  # revealed: the next page comes by itself
    expect(sessions).to_have_count(65)
    expect(more).to_have_count(0)
    expect(page.locator("#session-list [data-testid=session-group]")).to_have_count(1)
    # Pinning the last one loaded: it goes on top, and the pages loaded stay loaded.
    last = sessions.last
    last.get_by_test_id("pin-session").click()
    pinned = page.locator("[data-testid=pinned-sessions] [data-testid=session-link]")
    expect(pinned).to_have_text(["Chat 000"])
    expect(sessions).to_have_count(65)
    expect(page.locator("#session-list [data-testid=session-group]")).to_have_count(2)
    assert violations(page) == [], json.dumps(violations(page), indent=1)
