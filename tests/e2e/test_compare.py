"""Comparing two points of a session in Chromium, at 1366 and 390 px: chat, save a checkpoint,
go on, restore it as a branch, chat differently, then compare through the branch tree's
"Compare with the branch I came from" and through the panel's picker (a checkpoint against the
current branch). The two sides part where they should, side by side on a wide screen and stacked
on a phone, a file's diff scrolls in its own box, nothing leaves the viewport, and axe finds no
serious violation in the light or the dark theme."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import chat, current_branch_id, new_session, open_restore, save_checkpoint, sign_up
from .test_accessibility import violations

pytestmark = pytest.mark.e2e


def _put_file(app, key: str, session: int, path: str, text: str) -> None:
    request = urllib.request.Request(  # noqa: S310 - the test's own local server
        f"{app.base_url}/api/v1/sessions/{session}/files/{path}",
        data=text.encode(),
        method="PUT",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "text/plain; charset=utf-8"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        assert answer.status in (200, 201)


def _panel(page, width: int, *, open_: bool) -> None:
    """Open (or close) the side panel: a drawer below 1000 px, always shown above."""
    if width >= 1000:
        return
    if open_:
        page.get_by_test_id("toggle-panel").click()
        expect(page.locator("#side-panel")).to_be_visible()
    else:
        page.get_by_test_id("close-panel").click()
        expect(page.locator("#side-panel")).to_be_hidden()


def _fits(page, width: int) -> None:
    overflow = page.evaluate("() => document.scrollingElement.scrollWidth")
    assert overflow <= width, f"the page is {overflow} px wide in a {width} px window"


def _axe_in_both_themes(page, where: str) -> dict[str, list]:
    found = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        found[f"{where}, {scheme}"] = violations(page, targets=True)
    page.emulate_media(color_scheme="light")
    return {name: v for name, v in found.items() if v}


@pytest.mark.parametrize("width", [1366, 390])
def test_compare_a_restored_branch_with_where_it_came_from(page, app, app_settings, llm, width):
    username = sign_up(page, app.base_url)
    session = new_session(page)
    page.set_viewport_size({"width": width, "height": 844})
    key = app.manage(app_settings, "createapikey", username).strip().splitlines()[-1]
    _put_file(app, key, session, "plan.md", "step 1\nstep 2\n")
    llm.queue(Reply("first answer"))
    chat(page, "first question")
    main = current_branch_id(page)

    _panel(page, width, open_=True)
    save_checkpoint(page, "start")
    _panel(page, width, open_=False)
    llm.queue(Reply("the old way"))
    chat(page, "go the old way")

    _panel(page, width, open_=True)
    dialog = open_restore(page, "start")
    with page.expect_response(lambda r: "/restore/" in r.url and r.request.method == "POST"):
        dialog.get_by_test_id("confirm-restore").click()
    expect(dialog).to_be_hidden()
    expect(page.get_by_test_id("current-branch")).not_to_have_attribute("data-branch-id", main)
    restored = current_branch_id(page)
    _put_file(app, key, session, "plan.md", "step 1\n<b>step two</b>\n")
    _panel(page, width, open_=False)
    llm.queue(Reply("the new way"))
    chat(page, "go the new way")

    # From the branch tree: the restored branch against the branch it came from.
    _panel(page, width, open_=True)
    link = page.locator(f'[data-testid=branch][data-branch-id="{restored}"]').locator(
        "xpath=following-sibling::a[@data-testid='compare-with-origin']"
    )
    with page.expect_navigation():
        link.click()
    page.wait_for_url(re.compile(r"/compare/\?from=branch:\d+&to=branch:\d+$"))
    expect(page.get_by_test_id("compare-common")).to_contain_text("2 messages in common")
    source = page.get_by_test_id("compare-side-from")
    target = page.get_by_test_id("compare-side-to")
    expect(source.locator("[data-testid=message] .body")).to_have_text(
        ["go the old way", "the old way"]
    )
    expect(target.locator("[data-testid=message] .body")).to_have_text(
        ["go the new way", "the new way"]
    )
    diff = page.locator('[data-testid=compare-file][data-path="plan.md"]')
    expect(diff.get_by_test_id("file-diff")).to_contain_text("+<b>step two</b>")
    expect(diff.locator("pre b")).to_have_count(0)  # the file's markup is text

    # Side by side on a wide screen, stacked on a phone; the page never scrolls sideways, a
    # wide diff scrolls in its own box.
    a, b = source.bounding_box(), target.bounding_box()
    assert a is not None
    assert b is not None
    if width >= 1000:
        assert abs(a["y"] - b["y"]) < 1
        assert a["x"] + a["width"] <= b["x"]
    else:
        assert b["y"] >= a["y"] + a["height"]
    _fits(page, width)
    failing = _axe_in_both_themes(page, "compare view")

    # From the panel's picker: the checkpoint against the current branch.
    page.get_by_test_id("back-to-chat").click()
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    _panel(page, width, open_=True)
    picker = page.get_by_test_id("compare-picker")
    picker.get_by_test_id("compare-open").click()
    start = picker.locator("[data-testid=compare-from] option", has_text=re.compile(r"^“start” · "))
    expect(start).to_have_count(1)
    expect(picker.get_by_test_id("compare-to")).to_have_value(f"branch:{restored}")
    picked = violations(page, targets=True)  # the chat page with the picker open
    if picked:
        failing["panel picker"] = picked
    picker.get_by_test_id("compare-from").select_option(start.get_attribute("value"))
    with page.expect_navigation():
        picker.get_by_test_id("compare-submit").click()
    expect(page.get_by_test_id("compare-common")).to_contain_text("2 messages in common")
    expect(page.get_by_test_id("compare-side-from").get_by_test_id("side-empty")).to_be_visible()
    expect(
        page.get_by_test_id("compare-side-to").locator("[data-testid=message] .body")
    ).to_have_text(["go the new way", "the new way"])
    _fits(page, width)

    # A ref that does not parse: said on the page, the picker still there.
    page.goto(f"{app.base_url}/chat/{session}/compare/?from=nonsense&to=branch:1")
    expect(page.get_by_test_id("compare-error")).to_contain_text("branch:<id> or checkpoint:<id>")
    expect(page.get_by_test_id("compare-form")).to_be_visible()
    failing |= _axe_in_both_themes(page, "compare error")
    assert not failing, json.dumps(failing, indent=1)
