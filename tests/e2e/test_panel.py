"""The side panel with many checkpoints, in Chromium: the branch tree in view at once, the
newest checkpoints a page at a time, and a filter that a live update does not undo."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import new_session, sign_up

pytestmark = pytest.mark.e2e


def _save(page, name: str) -> None:
    page.get_by_test_id("checkpoint-name").fill(name)
    page.get_by_test_id("save-checkpoint").click()
    expect(page.get_by_test_id("checkpoint-saved")).to_have_text(f"Saved “{name}”.")


def test_many_checkpoints_page_and_filter_without_hiding_the_tree(page, app):
    page.set_viewport_size({"width": 1400, "height": 800})
    sign_up(page, app.base_url)
    new_session(page)
    for i in range(1, 26):
        _save(page, f"cp-{i}")
    items = page.locator("#checkpoint-list [data-testid=checkpoint]")
    expect(page.get_by_test_id("checkpoint-total")).to_have_text("25")
    expect(items).to_have_count(20)
    expect(items.first.locator(".name")).to_have_text("cp-25")

    # The branch tree is in the panel's first screen, without scrolling it.
    panel = page.locator("#side-panel")
    assert panel.evaluate("p => p.scrollTop") == 0
    tree = page.get_by_test_id("branch-tree").bounding_box()
    box = panel.bounding_box()
    assert tree is not None
    assert box is not None
    assert tree["y"] < box["y"] + box["height"]
    expect(page.get_by_test_id("branch").first).to_be_in_viewport()

    # "Show older" loads the rest, once.
    page.get_by_test_id("show-older").click()
    expect(items).to_have_count(25)
    expect(items.last.locator(".name")).to_have_text("cp-1")
    expect(page.get_by_test_id("show-older")).to_have_count(0)

    # Automatic only: none yet. A checkpoint saved now (a live update of the panel) keeps the
    # filter: the list stays filtered, the count follows.
    page.get_by_test_id("checkpoint-kind").select_option("auto")
    expect(page.get_by_test_id("no-checkpoints")).to_have_text("No checkpoints match this filter.")
    _save(page, "cp-26")
    expect(page.get_by_test_id("checkpoint-total")).to_have_text("26")
    expect(page.get_by_test_id("checkpoint-kind")).to_have_value("auto")
    expect(page.get_by_test_id("no-checkpoints")).to_be_visible()
    expect(items).to_have_count(0)

    # Manual: a page of the newest again, the new one first.
    page.get_by_test_id("checkpoint-kind").select_option("manual")
    expect(items).to_have_count(20)
    expect(items.first.locator(".name")).to_have_text("cp-26")

    # A taken name gets a number, and the page says which.
    page.get_by_test_id("checkpoint-name").fill("cp-26")
    page.get_by_test_id("save-checkpoint").click()
    expect(page.get_by_test_id("checkpoint-saved")).to_have_text("Saved “cp-26 (2)”.")
    expect(items.first.locator(".name")).to_have_text("cp-26 (2)")
    expect(page.get_by_test_id("checkpoint-kind")).to_have_value("manual")

    # Saved in another tab: this tab hears it over its socket and lists it, still filtered.
    other = page.context.new_page()
    other.goto(page.url)
    other.get_by_test_id("checkpoint-name").fill("from-the-other-tab")
    other.get_by_test_id("save-checkpoint").click()
    expect(other.get_by_test_id("checkpoint-saved")).to_be_visible()
    expect(items.first.locator(".name")).to_have_text("from-the-other-tab")
    expect(page.get_by_test_id("checkpoint-kind")).to_have_value("manual")
    expect(page.get_by_test_id("checkpoint-total")).to_have_text("28")
    other.close()
