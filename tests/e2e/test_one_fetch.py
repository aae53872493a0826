"""One fetch per action, counted in Chromium: the tab that acts gets the page's new state in the
answer to its own request and fetches nothing when its socket tells of its own change; another
tab fetches one refresh per event, the side panel's list and the Files panel's tree folded in.

Each count ends with a change made in the other tab (a checkpoint saved there): a socket sends
in order, so once the counted tab shows that change, it has handled every event before it, and
the one refresh that change costs it is the only request expected besides the action's own."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

from .conftest import (
    chat,
    checkpoint,
    current_branch_id,
    new_session,
    open_restore,
    save_checkpoint,
    send_message,
    sign_up,
    wait_turn_done,
    wait_ws_open,
)

pytestmark = pytest.mark.e2e


class Requests:
    """The HTTP requests a page makes (its socket's frames are not requests)."""

    def __init__(self, page) -> None:
        self.seen: list[tuple[str, str]] = []
        self.on = False
        page.on("request", self._heard)

    def _heard(self, request) -> None:
        if self.on and request.resource_type in ("fetch", "xhr", "document"):
            self.seen.append((request.method, urlparse(request.url).path))

    def start(self) -> None:
        self.seen.clear()
        self.on = True

    def stop(self) -> list[tuple[str, str]]:
        self.on = False
        return list(self.seen)


def _marker(other, one, name: str) -> None:
    """Save checkpoint `name` in tab `other`; wait until tab `one` lists it."""
    save_checkpoint(other, name)
    expect(checkpoint(one, name)).to_have_count(1)


def _second_tab(page):
    other = page.context.new_page()
    other.goto(page.url)
    wait_ws_open(other)
    return other


def test_a_restore_from_the_panel_costs_the_acting_tab_one_request(page, app, llm):
    sign_up(page, app.base_url)
    session = new_session(page)
    chat(page, "first question")
    save_checkpoint(page, "early")
    chat(page, "second question")
    other = _second_tab(page)
    before = current_branch_id(page)
    requests = Requests(page)
    watched = Requests(other)

    dialog = open_restore(page, "early")
    requests.start()
    watched.start()
    dialog.get_by_test_id("confirm-restore").click()
    expect(page.get_by_test_id("restore-dialog")).to_have_count(0)
    expect(page.get_by_test_id("current-branch")).not_to_have_attribute("data-branch-id", before)
    expect(other.get_by_test_id("current-branch")).not_to_have_attribute("data-branch-id", before)
    _marker(other, page, "after-the-restore")
    acting = requests.stop()
    watching = watched.stop()

    refresh = ("GET", f"/chat/{session}/refresh/")
    restore = [r for r in acting if r[0] == "POST"]
    assert len(restore) == 1, acting
    assert re.fullmatch(r"/chat/checkpoints/\d+/restore/", restore[0][1]), acting
    # Besides the restore: only the refresh that the other tab's checkpoint cost.
    assert sorted(acting) == sorted([restore[0], refresh]), acting
    # The other tab: one refresh for the restore (its panel and files tree in it), and the
    # save of its own checkpoint, whose answer was its refresh.
    assert sorted(watching) == sorted([refresh, ("POST", f"/chat/{session}/checkpoints/")])
    # What the restore shows, in both tabs: the shorter history, the files tree, the list.
    for tab in (page, other):
        expect(tab.locator("#messages [data-testid=message][data-role=user]")).to_have_count(1)
        expect(checkpoint(tab, "early")).to_have_count(1)
        expect(tab.get_by_test_id("files-tree")).to_be_visible()


def test_a_turns_end_costs_the_tab_one_request(page, app, llm):
    sign_up(page, app.base_url)
    session = new_session(page)
    chat(page, "hello")  # the first turn's end also names the session (agents.titles)
    expect(page.get_by_test_id("session-title")).to_have_text("Fake title")
    other = _second_tab(page)
    words = " ".join(f"w{n}" for n in range(12))
    llm.queue(
        ToolCalls([ToolCall("write_file", {"path": "notes.md", "content": "# Notes\n"})]),
        Reply(words, chunk_size=1, delay=0.25),
    )
    requests = Requests(page)
    before = send_message(page, "write the notes")
    # Counted once the reply streams steadily (its bubble in place, a few pieces shown): from
    # there on, only the turn's end, with its automatic checkpoint, is left.
    streaming = page.locator("[data-streaming=true] .body")
    expect(streaming).to_contain_text("w3")
    requests.start()
    wait_turn_done(page, before)
    expect(page.get_by_test_id("files-tree")).to_contain_text("notes.md")
    expect(checkpoint(page, "after-write_file")).to_have_count(1)
    # The other tab has caught up with the turn's end before it acts: a checkpoint saved there
    # while its own refresh of the turn's end is still out can be lost from its list (a known
    # race between a refresh and the tab's own answer, seen on a loaded machine).
    expect(checkpoint(other, "after-write_file")).to_have_count(1)
    _marker(other, page, "after-the-turn")
    counted = requests.stop()

    refresh = ("GET", f"/chat/{session}/refresh/")
    # The turn's end (and its automatic checkpoint): one refresh; the other tab's checkpoint:
    # one more.
    assert counted == [refresh, refresh], counted
