"""Share links in Chromium: made from a branch's Share button (the whole branch or up to a
checkpoint), the address copied, opened signed out (read-only, nothing after the shared point,
no cookie set), listed on the profile with its views and deleted there, after which the address
is a 404. The dialog, the profile's list and the shared page at 1366 and 390 px, light and dark,
with axe finding nothing serious."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import chat, new_session, save_checkpoint, sign_up
from .test_accessibility import violations

pytestmark = pytest.mark.e2e

SIZES = ((1366, 900), (390, 844))
SCHEMES = ("light", "dark")
ADDRESS = re.compile(r"^http://[^/]+/s/[A-Za-z0-9_-]{43}/$")


def open_share_dialog(page):
    """The Share dialog of the first branch of the tree (the panel opened first on a phone)."""
    if page.viewport_size["width"] < 1000 and not page.locator("#side-panel").is_visible():
        page.get_by_test_id("toggle-panel").click()
    node = page.locator("#branch-tree > li").first
    node.get_by_test_id("branch-share").click()
    dialog = page.get_by_test_id("share-dialog")
    expect(dialog).to_be_visible()
    return dialog


def within_width(page, locator) -> None:
    box = locator.bounding_box()
    assert box is not None
    assert box["x"] >= 0, box
    assert box["x"] + box["width"] <= page.viewport_size["width"], box


def test_share_a_branch_open_it_signed_out_and_take_it_back(contexts, app, llm):
    owner = contexts.new(permissions=["clipboard-read", "clipboard-write"]).new_page()
    owner.set_viewport_size({"width": 1366, "height": 900})
    sign_up(owner, app.base_url)
    new_session(owner)
    llm.queue(Reply("the first answer"))
    chat(owner, "the first question")
    save_checkpoint(owner, "after one")
    llm.queue(Reply("a later answer"))
    chat(owner, "a later question")

    # The dialog: up to the checkpoint; the address shown and copied.
    dialog = open_share_dialog(owner)
    assert violations(owner, targets=True) == [], "the share dialog"
    dialog.get_by_test_id("share-point").select_option(label="Up to “after one” (2 messages)")
    dialog.get_by_test_id("create-share").click()
    field = owner.get_by_test_id("share-url")
    expect(field).to_have_value(ADDRESS)
    address = field.input_value()
    assert violations(owner, targets=True) == [], "the share dialog with its address"
    owner.get_by_test_id("copy-share-url").click()
    expect(owner.get_by_test_id("copy-share-url")).to_have_text("Copied")
    assert owner.evaluate("() => navigator.clipboard.readText()") == address
    owner.get_by_test_id("share-done").click()
    expect(owner.get_by_test_id("share-dialog")).to_have_count(0)

    # Someone signed out opens it: read-only, up to the checkpoint, no cookie set.
    visitor_context = contexts.new()
    visitor = visitor_context.new_page()
    response = visitor.goto(address)
    assert response is not None
    assert response.status == 200
    assert "set-cookie" not in response.headers
    expect(visitor.get_by_test_id("shared-summary")).to_contain_text("2 messages")
    messages = visitor.get_by_test_id("shared-messages")
    expect(messages).to_contain_text("the first question")
    expect(messages).to_contain_text("the first answer")
    expect(messages).not_to_contain_text("a later")
    expect(visitor.locator("form, textarea")).to_have_count(0)
    assert visitor_context.cookies() == []
    assert violations(visitor, targets=True) == [], "the shared page"

    # The owner's own browser opening it keeps its cookies as they were.
    before = sorted((c["name"], c["value"]) for c in owner.context.cookies())
    own_view = owner.context.new_page()
    own_view.goto(address)
    expect(own_view.get_by_test_id("shared-messages")).to_contain_text("the first answer")
    assert sorted((c["name"], c["value"]) for c in owner.context.cookies()) == before
    own_view.close()

    # The profile lists it with its views; Delete (confirmed) takes it back at once.
    owner.goto(f"{app.base_url}/accounts/profile/")
    row = owner.get_by_test_id("share-row")
    expect(row).to_have_count(1)
    expect(row.get_by_test_id("share-views")).to_contain_text("2 views")
    expect(row).to_contain_text("after one")
    assert violations(owner, targets=True) == [], "the profile's share links"
    row.get_by_test_id("share-copy").click()
    expect(row.get_by_test_id("share-copy")).to_have_text("Copied")
    assert owner.evaluate("() => navigator.clipboard.readText()") == address
    owner.once("dialog", lambda d: d.accept())
    with owner.expect_navigation():
        row.get_by_test_id("share-delete").click()
    expect(owner.get_by_test_id("no-shares")).to_be_visible()
    gone = visitor.goto(address)
    assert gone is not None
    assert gone.status == 404
    expect(visitor.get_by_test_id("error-page")).to_be_visible()
    assert visitor_context.cookies() == []


def test_the_dialog_the_profile_and_the_shared_page_at_both_sizes_in_both_themes(
    contexts, app, llm
):
    owner = contexts.new().new_page()
    sign_up(owner, app.base_url)
    session = new_session(owner)
    llm.queue(Reply("Here is code:\n\n```python\nprint('hi')\n```\n\n" + "A long line. " * 40))
    chat(owner, "show me some code " + "and a long question " * 10)
    dialog = open_share_dialog(owner)
    dialog.get_by_test_id("create-share").click()
    address = owner.get_by_test_id("share-url").input_value()
    owner.get_by_test_id("share-done").click()
    visitor = contexts.new().new_page()

    for width, height in SIZES:
        for scheme in SCHEMES:
            where = f"{width}px {scheme}"
            for page in (owner, visitor):
                page.set_viewport_size({"width": width, "height": height})
                page.emulate_media(color_scheme=scheme)
            owner.goto(f"{app.base_url}/chat/{session}/")
            dialog = open_share_dialog(owner)
            within_width(owner, dialog)
            within_width(owner, dialog.get_by_test_id("create-share"))
            assert violations(owner, targets=True) == [], f"{where}, the dialog"
            dialog.get_by_text("Cancel").click()
            expect(owner.get_by_test_id("share-dialog")).to_have_count(0)

            owner.goto(f"{app.base_url}/accounts/profile/")
            expect(owner.get_by_test_id("share-row")).to_have_count(1)
            within_width(owner, owner.get_by_test_id("share-delete"))
            assert violations(owner, targets=True) == [], f"{where}, the profile"

            visitor.goto(address)
            expect(visitor.get_by_test_id("shared-messages")).to_contain_text("print('hi')")
            within_width(visitor, visitor.get_by_test_id("shared-summary"))
            within_width(visitor, visitor.locator("[data-testid=message]").last)
            assert violations(visitor, targets=True) == [], f"{where}, the shared page"
