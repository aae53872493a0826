"""The chat at 1366, 960 and 390 pixels wide, and by keyboard alone: nothing leaves the viewport,
the sidebar collapses (a drawer on a phone), the checkpoint and branch panel is a drawer below
1000 px, Send stays on screen, and edit, regenerate, rename and delete are reached with Tab."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import (
    FINISHED_ASSISTANT,
    chat,
    checkpoint,
    new_session,
    open_restore,
    save_checkpoint,
    sign_up,
)

pytestmark = pytest.mark.e2e

SIZES = {"wide": (1366, 800), "medium": (960, 800), "phone": (390, 844)}


def no_horizontal_overflow(page) -> None:
    widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths


def start(page, app, llm, size: str) -> None:
    sign_up(page, app.base_url)
    new_session(page)
    width, height = SIZES[size]
    page.set_viewport_size({"width": width, "height": height})
    llm.queue(Reply("A reply with a long line: `" + "x" * 400 + "`\n\n```\n" + "y" * 600 + "\n```"))
    chat(page, "hello at " + size)


def test_wide_shows_all_three_columns_and_the_sidebar_collapses(page, app, llm):
    start(page, app, llm, "wide")
    no_horizontal_overflow(page)
    sidebar, panel = page.locator("#sidebar"), page.locator("#side-panel")
    expect(sidebar).to_be_visible()
    expect(panel).to_be_visible()
    expect(page.get_by_test_id("toggle-panel")).to_be_hidden()
    expect(page.get_by_test_id("branch-tree")).to_be_in_viewport(ratio=1)

    toggle = page.get_by_test_id("toggle-sidebar")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    toggle.click()
    expect(sidebar).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    no_horizontal_overflow(page)
    toggle.click()
    expect(sidebar).to_be_visible()


def test_medium_opens_the_panel_as_a_drawer(page, app, llm):
    start(page, app, llm, "medium")
    no_horizontal_overflow(page)
    panel = page.locator("#side-panel")
    expect(panel).to_be_hidden()
    toggle = page.get_by_test_id("toggle-panel")
    expect(toggle).to_be_visible()
    toggle.click()
    expect(panel).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    tree = page.get_by_test_id("branch-tree")
    expect(tree).to_be_visible()
    expect(tree).to_be_in_viewport(ratio=1)
    page.get_by_test_id("checkpoint-name").scroll_into_view_if_needed()
    expect(page.get_by_test_id("checkpoint-name")).to_be_in_viewport(ratio=1)
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    expect(toggle).to_be_focused()
    no_horizontal_overflow(page)


def test_a_phone_keeps_send_on_screen_and_reaches_sessions_and_the_panel(page, app, llm):
    start(page, app, llm, "phone")
    no_horizontal_overflow(page)
    send = page.get_by_test_id("send")
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(page.locator("#side-panel")).to_be_hidden()
    expect(send).to_be_in_viewport(ratio=1)
    expect(page.get_by_test_id("message-input")).to_be_in_viewport(ratio=1)
    expect(page.locator(FINISHED_ASSISTANT).last.locator(".body")).to_be_in_viewport(ratio=1)

    page.get_by_test_id("toggle-sidebar").click()
    sidebar = page.locator("#sidebar")
    expect(sidebar).to_be_visible()
    expect(page.get_by_test_id("new-session").first).to_be_in_viewport(ratio=1)
    page.get_by_test_id("close-sidebar").click()
    expect(sidebar).to_be_hidden()

    page.get_by_test_id("toggle-panel").click()
    expect(page.get_by_test_id("branch-tree")).to_be_visible()
    expect(page.get_by_test_id("branch-tree")).to_be_in_viewport(ratio=1)
    page.get_by_test_id("close-panel").click()
    expect(page.locator("#side-panel")).to_be_hidden()
    no_horizontal_overflow(page)


# --- keyboard only ---------------------------------------------------------------------------


def tab_to(page, locator, limit: int = 400) -> None:
    """Press Tab until `locator` has the focus (it must be reachable and visible by keyboard)."""
    handle = locator.element_handle()
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("el => document.activeElement === el", handle):
            assert locator.is_visible()
            return
    raise AssertionError(f"{locator} is never reached with Tab")


def test_edit_regenerate_rename_and_delete_by_keyboard_alone(page, app, llm):
    page.set_viewport_size({"width": 1366, "height": 800})
    sign_up(page, app.base_url)
    new_session(page)
    llm.queue(Reply("first answer"))
    chat(page, "first question")
    replies = page.locator(f"{FINISHED_ASSISTANT} .body")

    # Regenerate the reply.
    llm.queue(Reply("second answer"))
    tab_to(page, page.get_by_test_id("regenerate").last)
    page.keyboard.press("Enter")
    expect(replies.last).to_have_text("second answer")

    # Edit the question.
    tab_to(page, page.get_by_test_id("edit-message").first)
    page.keyboard.press("Enter")
    box = page.get_by_test_id("edit-input")
    expect(box).to_be_visible()
    box.focus()
    page.keyboard.press("Control+A")
    page.keyboard.type("edited question")
    llm.queue(Reply("answer to the edit"))
    tab_to(page, page.get_by_test_id("edit-send"))
    page.keyboard.press("Enter")
    expect(replies.last).to_have_text("answer to the edit")

    # Rename the session in place.
    entry = page.locator("#session-list [data-testid=session]").first
    tab_to(page, entry.get_by_test_id("rename-session"))
    page.keyboard.press("Enter")
    field = entry.locator("input[name=name]")
    expect(field).to_be_focused()
    page.keyboard.type("Keyboard only")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("session-title")).to_have_text("Keyboard only")

    # Delete it (the confirmation accepted from the keyboard's point of view: Enter on OK).
    page.once("dialog", lambda dialog: dialog.accept())
    entry = page.locator("#session-list [data-testid=session]").first
    tab_to(page, entry.get_by_test_id("delete-session"))
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.locator("#session-list [data-testid=session]")).to_have_count(0)


def test_a_touch_screen_shows_every_messages_actions_without_hover(contexts, app, llm):
    page = contexts.new(
        viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True
    ).new_page()
    sign_up(page, app.base_url)
    page.get_by_test_id("toggle-sidebar").click()  # the sessions drawer, on the home page
    new_session(page)
    llm.queue(Reply("touch answer"))
    chat(page, "touch question")
    expect(page.get_by_test_id("edit-message").first).to_be_visible()
    expect(page.get_by_test_id("regenerate").last).to_be_visible()
    page.get_by_test_id("edit-message").first.tap()
    expect(page.get_by_test_id("edit-input")).to_be_visible()


# --- long names -------------------------------------------------------------------------------

LONG_WORD = "n" * 200
LONG_PATH = "folder-" + "p" * 80 + "/" + "f" * 100 + ".md"
# Elements past their region's edge, not counting those inside a box that scrolls or clips them.
OUTSIDE = """(region) => {
    const edge = region.getBoundingClientRect();
    const out = [];
    for (const el of region.querySelectorAll("*")) {
        const box = el.getBoundingClientRect();
        if (!box.width || !el.checkVisibility()) continue;
        let clipped = false;
        for (let up = el.parentElement; up && up !== region; up = up.parentElement) {
            if (getComputedStyle(up).overflowX !== "visible") { clipped = true; break; }
        }
        if (clipped) continue;
        if (box.right > edge.right + 1 || box.left < edge.left - 1) {
            const at = (b) => `${Math.round(b.left)}-${Math.round(b.right)}`;
            out.push(`${el.localName}.${el.className} ${at(box)} of ${at(edge)}`);
        }
    }
    return out.slice(0, 10);
}"""


def api(page, method: str, path: str, **options):
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    headers = {"X-CSRFToken": token, "Referer": page.url, **options.pop("headers", {})}
    answer = page.request.fetch(
        page.url.split("/chat/")[0] + "/api/v1" + path, method=method, headers=headers, **options
    )
    assert answer.ok, (path, answer.status, answer.text())
    return answer


def inside(page, selector: str) -> None:
    out = page.evaluate(OUTSIDE, page.locator(selector).element_handle())
    assert not out, (selector, out)


def label_shown(locator) -> None:
    fits = locator.evaluate("el => el.scrollWidth <= el.clientWidth + 1 && el.clientWidth > 20")
    assert fits, locator


def test_names_of_200_characters_wrap_or_truncate_with_their_full_text_at_hand(page, app, llm):
    sign_up(page, app.base_url)
    sid = new_session(page)
    llm.queue(Reply("first answer"))
    chat(page, "first question")
    api(page, "PATCH", f"/sessions/{sid}/", data={"name": "s" * 200})
    branch = page.get_by_test_id("current-branch").get_attribute("data-branch-id")
    api(page, "PATCH", f"/branches/{branch}/", data={"name": "b" * 200})
    api(
        page,
        "PUT",
        f"/sessions/{sid}/files/{LONG_PATH}",
        data="hello",
        headers={"Content-Type": "text/plain"},
    )
    for size in ("wide", "phone"):
        width, height = SIZES[size]
        page.set_viewport_size({"width": width, "height": height})
        page.reload()
        if width < 1000:
            page.get_by_test_id("toggle-panel").click()
        expect(page.locator("#side-panel")).to_be_visible()
        name = f"{size}-" + LONG_WORD[len(size) + 1 :]
        save_checkpoint(page, name)
        expect(page.get_by_test_id("checkpoint-saved")).to_be_visible()
        label_shown(page.get_by_test_id("save-checkpoint"))
        expect(checkpoint(page, name).locator(".name")).to_have_attribute("title", name)
        expect(page.get_by_test_id("branch-label").first).to_have_attribute("title", "b" * 200)
        page.locator("#files-tree a.name").first.click()
        expect(page.get_by_test_id("file-open")).to_be_visible()
        inside(page, "#side-panel")
        no_horizontal_overflow(page)
        dialog = open_restore(page, name)
        inside(page, "#restore-dialog")
        label_shown(dialog.get_by_test_id("confirm-restore"))
        dialog.get_by_role("button", name="Cancel").click()
        if width < 1000:
            page.get_by_test_id("close-panel").click()
        if width < 700:
            page.get_by_test_id("toggle-sidebar").click()
        expect(page.locator("#sidebar")).to_be_visible()
        inside(page, "#sidebar")
        expect(page.get_by_test_id("session-link").first).to_have_attribute("title", "s" * 200)
        expect(page.get_by_test_id("session-title")).to_have_attribute("title", "s" * 200)
        inside(page, "#conv-header")
        no_horizontal_overflow(page)


# --- the sidebar's rows, width and collapse (issue 39, item 3) --------------------------------

TITLE = "A session title long enough to need most of the row to be read at all"
TITLE_WIDTH = "(el) => el.getBoundingClientRect().width"


def renamed(page, app) -> None:
    """The current session renamed to TITLE (through the API, as the page's own rename does)."""
    session_id = page.url.rstrip("/").rsplit("/", 1)[1]
    api(page, "PATCH", f"/sessions/{session_id}/", data={"name": TITLE})
    page.reload()


def test_a_title_gets_the_rows_width_and_its_actions_show_on_hover_or_focus(page, app, llm):
    sign_up(page, app.base_url)
    new_session(page)
    renamed(page, app)
    row = page.get_by_test_id("session").first
    link = row.get_by_test_id("session-link")
    page.mouse.move(900, 400)  # pointing elsewhere
    # The title has the row (all but its padding), not what is left beside four buttons.
    assert link.evaluate(TITLE_WIDTH) >= row.evaluate(TITLE_WIDTH) - 4
    actions = row.locator(".actions")
    assert float(actions.evaluate("(el) => getComputedStyle(el).opacity")) == 0
    row.hover()
    expect(actions).to_have_css("opacity", "1")
    page.mouse.move(900, 400)
    tab_to(page, row.get_by_test_id("rename-session"))
    expect(actions).to_have_css("opacity", "1")
    expect(row.get_by_test_id("session-more")).to_be_hidden()  # a pointer needs no "…"


def test_the_sidebars_width_and_collapse_are_remembered(page, app, llm):
    sign_up(page, app.base_url)
    new_session(page)
    sidebar = page.locator("#sidebar")
    assert round(sidebar.evaluate(TITLE_WIDTH)) == 260
    # As the grip in its corner leaves it (the browser's resize sets the element's width).
    sidebar.evaluate("(el) => { el.style.width = '340px'; }")
    page.wait_for_function("() => window.localStorage.getItem('rollback.sidebar.width') === '340'")
    page.reload()
    assert round(sidebar.evaluate(TITLE_WIDTH)) == 340

    page.get_by_test_id("toggle-sidebar").click()
    expect(sidebar).to_be_hidden()
    page.reload()
    expect(sidebar).to_be_hidden()
    expect(page.get_by_test_id("toggle-sidebar")).to_have_attribute("aria-expanded", "false")
    page.get_by_test_id("toggle-sidebar").click()
    page.reload()
    expect(sidebar).to_be_visible()


def test_a_touch_screen_opens_a_rows_actions_from_its_more_button(contexts, app, llm):
    page = contexts.new(
        viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True
    ).new_page()
    sign_up(page, app.base_url)
    page.get_by_test_id("toggle-sidebar").click()
    new_session(page)
    renamed(page, app)
    page.get_by_test_id("toggle-sidebar").click()
    row = page.get_by_test_id("session").first
    more = row.get_by_test_id("session-more")
    expect(row.get_by_test_id("archive-session")).to_be_hidden()
    # The title has the row but for the "…" (44 px under a finger) and the gap.
    spare = row.evaluate(TITLE_WIDTH) - row.get_by_test_id("session-link").evaluate(TITLE_WIDTH)
    assert spare <= 44 + 12, spare
    more.tap()
    expect(more).to_have_attribute("aria-expanded", "true")
    expect(row.get_by_test_id("archive-session")).to_be_visible()
    expect(row.get_by_test_id("rename-session")).to_be_visible()
    more.tap()
    expect(row.get_by_test_id("archive-session")).to_be_hidden()


# --- a phone's header (issue 39, item 4) -------------------------------------------------------

PLACEHOLDER_FITS = """(t) => {
    const style = getComputedStyle(t);
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = style.font;
    const room = t.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    return ctx.measureText(t.placeholder).width <= room;
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_phones_header_is_one_row_and_the_conversation_gets_most_of_the_height(
    page, app, llm, scheme
):
    page.emulate_media(color_scheme=scheme)
    start(page, app, llm, "phone")
    height = page.viewport_size["height"]
    messages = page.locator("#messages").bounding_box()
    assert messages["height"] >= 0.7 * height, messages
    # One row: the toggles, the title, "⋯" and the search share a line.
    tops = [
        round(page.get_by_test_id(testid).bounding_box()["y"])
        for testid in ("toggle-sidebar", "toggle-panel", "header-more")
    ]
    title = page.get_by_test_id("session-title").bounding_box()
    assert max(tops) - min(tops) <= 2, tops
    assert title["y"] < tops[0] + 44, (tops, title)
    expect(page.get_by_test_id("current-branch")).to_be_hidden()
    assert page.get_by_test_id("message-input").evaluate(PLACEHOLDER_FITS)
    no_horizontal_overflow(page)

    more = page.get_by_test_id("header-more")
    more.click()
    expect(more).to_have_attribute("aria-expanded", "true")
    for testid in ("current-branch", "context-gauge", "export", "export-markdown"):
        expect(page.get_by_test_id(testid)).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("current-branch")).to_be_hidden()
    expect(more).to_be_focused()
