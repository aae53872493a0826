"""No out-of-band fragment without its target, in Chromium (issue 39, item 12): with tabs of one
user on different sessions and sidebar views, a rename, an archive, an unarchive and an
approval's answer in one tab leave no `htmx:oobErrorNoTarget` and no console error in any."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

from .conftest import (
    FINISHED_ASSISTANT,
    TURN_TIMEOUT_MS,
    send_message,
    sign_up,
    wait_ws_open,
)
from .test_approval import approval_app  # noqa: F401 - the app with the approval tool
from .test_session_tabs import entry, make_session

pytestmark = pytest.mark.e2e

# Every oob fragment that found no target (the id it was for), from the page's first moment.
OOB_WATCH = """
window.__oobErrors = [];
document.addEventListener("htmx:oobErrorNoTarget", function (e) {
  var content = e.detail && e.detail.content;
  window.__oobErrors.push((content && content.id) || String(content && content.outerHTML));
});
"""


class Watched:
    """The tabs of one user, each with its console errors and oob errors recorded."""

    def __init__(self, context) -> None:
        self.context = context
        self.errors: list[str] = []
        context.add_init_script(OOB_WATCH)
        context.on("console", self._console)

    def _console(self, message) -> None:
        if message.type == "error":
            self.errors.append(f"{message.page.url if message.page else '?'}: {message.text}")

    def open(self, url: str):
        page = self.context.new_page()
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto(url)
        wait_ws_open(page)
        return page

    def oob_errors(self) -> dict[str, list[str]]:
        found = {}
        for n, page in enumerate(self.context.pages, start=1):
            ids = page.evaluate("() => window.__oobErrors || []")
            if ids:
                found[f"tab {n}, {page.url}"] = ids
        return found


def show_archived(page) -> None:
    page.get_by_test_id("show-archived").click()
    expect(page.locator("#session-list[data-archived]")).to_have_count(1)


def rename(page, session: int, name: str) -> None:
    entry(page, session).get_by_test_id("rename-session").click()
    field = entry(page, session).get_by_test_id("rename-input")
    field.fill(name)
    field.press("Enter")
    expect(page.locator(f"#session-link-{session}")).to_have_text(name)


def settle(*pages) -> None:
    """Every tab has had its events and the fetches they started answered."""
    for page in pages:
        page.wait_for_load_state("networkidle")
    pages[0].wait_for_timeout(1000)


def test_changes_in_one_tab_send_no_fragment_another_tab_cannot_place(
    contexts,
    approval_app,  # noqa: F811 - the fixture imported above
    llm,
):
    context = contexts.new(viewport={"width": 1366, "height": 800})
    tabs = Watched(context)
    one = context.new_page()
    one.on("dialog", lambda dialog: dialog.accept())
    sign_up(one, approval_app.base_url)
    first = make_session(one)
    second = make_session(one)
    base = approval_app.base_url
    one.goto(f"{base}/chat/{first}/")
    wait_ws_open(one)
    two = tabs.open(f"{base}/chat/{second}/")  # another session
    three = tabs.open(f"{base}/chat/{first}/")  # the same session, its sidebar on Archived
    show_archived(three)

    # Renamed in tab one, the session its page shows and the other one.
    rename(one, first, "First renamed")
    rename(one, second, "Second renamed")
    expect(two.get_by_test_id("session-title")).to_have_text("Second renamed")
    expect(three.get_by_test_id("session-title")).to_have_text("First renamed")

    # Archived in tab one: the session of tab two, then its own.
    entry(one, second).get_by_test_id("archive-session").click()
    expect(entry(one, second)).to_have_count(0)
    expect(two.get_by_test_id("archived-badge")).to_be_visible()
    entry(one, first).get_by_test_id("archive-session").click()
    expect(entry(one, first)).to_have_count(0)
    expect(three.get_by_test_id("archived-badge")).to_be_visible()
    expect(entry(three, first)).to_have_count(1)

    # Renamed while archived (from the Archived list of tab one), and unarchived there.
    show_archived(one)
    rename(one, first, "First again")
    expect(three.get_by_test_id("session-title")).to_have_text("First again")
    entry(one, second).get_by_test_id("unarchive-session").click()
    expect(entry(one, second)).to_have_count(0)
    expect(two.get_by_test_id("archived-badge")).to_have_count(0)
    entry(one, first).get_by_test_id("unarchive-session").click()
    expect(entry(one, first)).to_have_count(0)
    expect(one.get_by_test_id("archived-badge")).to_have_count(0)

    # An approval asked in tab one's session, answered in tab one.
    llm.queue(ToolCalls([ToolCall("send_email", {"to": "bob", "subject": "hi"})]), Reply("Sent."))
    send_message(one, "mail bob")
    for tab in (one, three):
        expect(tab.get_by_test_id("approval")).to_be_visible(timeout=TURN_TIMEOUT_MS)
    one.get_by_test_id("approve").click()
    for tab in (one, three):
        expect(tab.get_by_test_id("approval")).to_have_count(0, timeout=TURN_TIMEOUT_MS)
        expect(tab.locator(f"{FINISHED_ASSISTANT} .body").last).to_contain_text(
            "Sent.", timeout=TURN_TIMEOUT_MS
        )

    settle(one, two, three)
    assert tabs.oob_errors() == {}
    assert tabs.errors == []
