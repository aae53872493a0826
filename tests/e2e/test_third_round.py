"""The chat's third round in Chromium, at 1366 and 390 px, light and dark, with axe (issue 39):
"New session" opens the blank session rather than storing another; the compare page, opened
without points, does not compare a point with itself, and says so plainly when asked to; the
Memories form names its fields in plain words."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import chat, new_session, save_checkpoint, sign_up
from .test_accessibility import violations

pytestmark = pytest.mark.e2e

LOOKS = [(1366, "light"), (1366, "dark"), (390, "light"), (390, "dark")]
IDS = [f"{w}-{s}" for w, s in LOOKS]


def opened(contexts, app, width: int, scheme: str):
    page = contexts.new(viewport={"width": width, "height": 844}).new_page()
    page.emulate_media(color_scheme=scheme)
    sign_up(page, app.base_url)
    return page


def drawer(page, width: int) -> None:
    """The sessions drawer, on a phone (the sidebar is always there on a wide screen)."""
    if width < 700 and not page.get_by_test_id("session-list").is_visible():
        page.get_by_test_id("toggle-sidebar").click()


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_new_session_twice_opens_the_one_blank_session(contexts, app, width, scheme):
    page = opened(contexts, app, width, scheme)
    drawer(page, width)
    first = new_session(page)
    drawer(page, width)
    assert new_session(page) == first
    drawer(page, width)
    expect(page.get_by_test_id("session")).to_have_count(1)
    assert violations(page) == []


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_compare_opens_on_two_points_that_differ_and_names_one_point_plainly(
    contexts, app, llm, width, scheme
):
    page = opened(contexts, app, width, scheme)
    drawer(page, width)
    session = new_session(page)
    llm.queue(Reply("first answer"))
    chat(page, "first question")
    if width < 1000:
        page.get_by_test_id("toggle-panel").click()
    save_checkpoint(page, "first")
    page.goto(f"{app.base_url}/chat/{session}/compare/")
    source = page.get_by_test_id("compare-from").first.input_value()
    target = page.get_by_test_id("compare-to").first.input_value()
    assert source.startswith("checkpoint:")  # a branch made from none: its newest checkpoint
    assert source != target
    expect(page.get_by_test_id("compare-same-point")).to_have_count(0)
    assert violations(page) == []

    page.goto(f"{app.base_url}/chat/{session}/compare/?from={target}&to={target}")
    expect(page.get_by_test_id("compare-same-point")).to_have_text(
        "These are the same point: nothing differs. Choose another point for one side."
    )
    assert violations(page) == []


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_the_memories_form_names_its_fields_in_plain_words(contexts, app, width, scheme):
    page = opened(contexts, app, width, scheme)
    page.goto(f"{app.base_url}/memories/")
    for label in ("Summary (one line)", "Overview (two or three sentences)", "Details (Markdown)"):
        expect(page.get_by_text(label, exact=True)).to_be_visible()
    shown = page.locator("main").inner_text()  # the words shown (not a random token's)
    assert not any(internal in shown for internal in ("L0", "L1", "L2"))
    assert violations(page) == []


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_refusals_name_no_setting_or_stored_field(contexts, app, width, scheme):
    """Issue 39: "(WORKSPACE_MAX_FILE_BYTES)" and "settings.instructions" were shown to people."""
    page = opened(contexts, app, width, scheme)
    drawer(page, width)
    new_session(page)
    if width < 1000:
        page.get_by_test_id("toggle-panel").click()
    page.get_by_test_id("upload-files").set_input_files(
        {"name": "big.bin", "mimeType": "application/octet-stream", "buffer": b"\x00" * 300_000}
    )
    page.get_by_test_id("upload-submit").click()
    error = page.get_by_test_id("upload-error")
    expect(error).to_contain_text("a workspace file may hold at most 262,144 bytes")
    assert "WORKSPACE_" not in error.inner_text()
    assert violations(page) == [], "the upload's refusal"
    if width < 1000:
        page.get_by_test_id("close-panel").click()
    if width < 700:
        page.get_by_test_id("header-more").click()
    page.get_by_test_id("open-instructions").click()
    box = page.get_by_test_id("session-instructions")
    box.evaluate("(box) => box.removeAttribute('maxlength')")
    box.fill("z" * 8_001)
    page.get_by_test_id("save-instructions").click()
    said = page.get_by_test_id("instructions-error")
    expect(said).to_contain_text("the limit is 8,000")
    assert "settings." not in said.inner_text()
    assert violations(page) == [], "the instructions' refusal"
