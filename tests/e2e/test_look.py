"""How the app looks, in Chromium at 1366 and 390 px wide, in the light and the dark scheme: the
default theme follows the system as a whole (the admin too) and an explicit choice wins; no page
scrolls sideways at 390 px; a skip link comes first; targets are 44 px under a finger; a wide
table scrolls in its own box; the rewind note is a warning only when something is lost (the
user's own upload too, counted)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import chat, new_session, open_restore, save_checkpoint, sign_in_as_staff, sign_up
from .test_layout import no_horizontal_overflow

pytestmark = pytest.mark.e2e

SIZES = {"wide": (1366, 800), "phone": (390, 844)}
SCHEMES = ("light", "dark")
FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]"
TARGETS = "button, summary, select, input:not([type=hidden]), a.button, .session-list a, .usernav a"

# Whether an element's background is dark (its own, or the first ancestor's that has one).
IS_DARK = """(el) => {
    for (let node = el; node; node = node.parentElement) {
        const rgb = getComputedStyle(node).backgroundColor.match(/[\\d.]+/g).map(Number);
        if (rgb.length === 4 && rgb[3] === 0) continue;
        return (rgb[0] * 299 + rgb[1] * 587 + rgb[2] * 114) / 1000 < 128;
    }
    return false;
}"""


def dark(page, selector: str) -> bool:
    return page.locator(selector).first.evaluate(IS_DARK)


def choose_theme(page, app, theme: str) -> None:
    page.goto(f"{app.base_url}/accounts/profile/")
    page.get_by_test_id("theme").select_option(theme)
    with page.expect_navigation():
        page.get_by_test_id("save-preferences").click()


def test_the_system_theme_applies_as_a_whole_and_an_explicit_choice_wins(
    page, app, app_settings, llm
):
    sign_in_as_staff(page, app, app_settings)
    page.get_by_test_id("new-session").first.click()
    page.wait_for_url("**/chat/*/")
    chat_url = page.url
    llm.queue(Reply("a reply"))
    chat(page, "hello")
    regions = ["body", ".topbar", "#sidebar", ".composer", "#side-panel", "[data-role=assistant]"]
    for chosen, scheme, expected in [
        ("system", "dark", True),
        ("system", "light", False),
        ("light", "dark", False),
        ("dark", "light", True),
    ]:
        if page.evaluate("document.documentElement.dataset.theme") != chosen:
            choose_theme(page, app, chosen)
        page.emulate_media(color_scheme=scheme)
        page.goto(chat_url)
        shown = {region: dark(page, region) for region in regions}
        assert shown == dict.fromkeys(regions, expected), (chosen, scheme, shown)
        page.goto(f"{app.base_url}/admin/sessions_app/session/")
        # (Django's header is dark blue in both of its themes.)
        admin = {region: dark(page, region) for region in ("body", "#content", "#result_list")}
        assert admin == dict.fromkeys(admin, expected), (chosen, scheme, "admin", admin)


def test_no_page_scrolls_sideways_at_390_px(page, app, app_settings, llm):
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in_as_staff(page, app, app_settings)
    page.get_by_test_id("toggle-sidebar").click()
    new_session(page)
    llm.queue(Reply("| " + " | ".join(f"column{i}" for i in range(12)) + " |\n" + "|---" * 12))
    chat(page, "a wide table")
    pages = [
        page.url,
        "/chat/",
        "/accounts/profile/",
        "/accounts/password/",
        "/memories/",
        "/admin/",
        "/admin/sessions_app/session/",
        "/admin/accounts/user/",
        "/admin/accounts/user/add/",
        "/admin/dashboard/",
        "/admin/ops/auditrecord/",
    ]
    for scheme in SCHEMES:
        page.emulate_media(color_scheme=scheme)
        for path in pages:
            page.goto(path if path.startswith("http") else app.base_url + path)
            no_horizontal_overflow(page)
            expect(page.locator("body")).to_be_visible()
    page.goto(f"{app.base_url}/admin/")
    logout = page.locator("#logout-form button")
    expect(logout).to_be_in_viewport(ratio=1)


def test_the_skip_link_comes_first_and_leads_past_the_sidebar(page, app, llm):
    sign_up(page, app.base_url)
    for size, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        if size == "phone":
            page.get_by_test_id("toggle-sidebar").click()
        new_session(page)
        skip = page.get_by_test_id("skip-link")
        first = page.evaluate(f"document.querySelector({FOCUSABLE!r}).dataset.testid")
        assert first == "skip-link"
        expect(skip).not_to_be_in_viewport()
        skip.focus()
        expect(skip).to_have_text("Skip to conversation")
        expect(skip).to_be_in_viewport(ratio=1)
        page.keyboard.press("Enter")
        page.keyboard.press("Tab")
        inside = page.evaluate(
            "() => !!document.activeElement.closest('.conversation')"
            " && !document.activeElement.closest('.layout-bar')"
        )
        assert inside, page.evaluate("document.activeElement.outerHTML")
    page.goto(f"{app.base_url}/memories/")
    page.keyboard.press("Tab")
    expect(page.get_by_test_id("skip-link")).to_be_focused()
    expect(page.get_by_test_id("skip-link")).to_have_text("Skip to content")


def test_a_phone_gives_every_control_44_px_and_archive_says_what_it_does(contexts, app, llm):
    page = contexts.new(
        viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True
    ).new_page()
    sign_up(page, app.base_url)
    page.get_by_test_id("toggle-sidebar").click()
    new_session(page)
    llm.queue(Reply("an answer"))
    chat(page, "a question")
    page.get_by_test_id("toggle-sidebar").click()
    archive = page.get_by_test_id("archive-session").first
    expect(archive).to_have_text("Archive")
    # Measured once the drawer has slid in: in the middle of its transition a box is the
    # translated quad's, whose width may come out a hair under 44 (43.99...).
    small = page.evaluate(
        """async (targets) => {
            const drawer = document.querySelector(".sidebar");
            await Promise.all(drawer.getAnimations().map(a => a.finished.catch(() => null)));
            return [...document.querySelectorAll(targets)]
                .filter(el => el.checkVisibility())
                .map(el => [el.getAttribute("data-testid") || el.textContent.trim().slice(0, 20),
                            el.getBoundingClientRect()])
                .filter(([, box]) => box.width < 44 || box.height < 44)
                .map(([name, box]) => `${name}: ${box.width}x${box.height}`);
        }""",
        TARGETS,
    )
    assert not small, small


@pytest.mark.parametrize("size", list(SIZES))
def test_a_wide_table_scrolls_in_its_box_and_keeps_its_words_whole(page, app, llm, size):
    width, height = SIZES[size]
    page.set_viewport_size({"width": width, "height": height})
    sign_up(page, app.base_url)
    if size == "phone":
        page.get_by_test_id("toggle-sidebar").click()
    new_session(page)
    words = [f"Supercalifragilistic{i}" for i in range(10)]
    llm.queue(
        Reply("| " + " | ".join(words) + " |\n" + "|---" * 10 + "|\n| " + " | ".join(words) + " |")
    )
    chat(page, "a wide table")
    table = page.locator("#messages [data-role=assistant] .body table").last
    expect(table).to_be_visible()
    scrolls = table.evaluate("t => t.scrollWidth > t.clientWidth")
    assert scrolls
    broken = table.evaluate(
        """t => [...t.querySelectorAll("td")].filter(td => {
            const range = document.createRange();
            range.selectNodeContents(td);
            return range.getClientRects().length > 1;
        }).map(td => td.textContent)"""
    )
    assert not broken, broken
    no_horizontal_overflow(page)


def test_the_rewind_note_warns_only_when_something_is_lost(page, app, llm):
    sign_up(page, app.base_url)
    new_session(page)
    llm.queue(Reply("one"))
    chat(page, "first")
    save_checkpoint(page, "at-the-end")
    for scheme in SCHEMES:
        page.emulate_media(color_scheme=scheme)
        dialog = open_restore(page, "at-the-end")
        note = dialog.get_by_test_id("rewind-warning")
        expect(note).to_have_text(
            "Nothing comes after this checkpoint on “main”: nothing is deleted."
        )
        expect(note).to_have_class("muted")
        dialog.get_by_role("button", name="Cancel").click()
        expect(dialog).to_be_hidden()
    # The user's own upload after the checkpoint: a rewind deletes it, and the note says so
    # (issue 36: it said "nothing is deleted").
    page.get_by_test_id("upload-files").set_input_files(
        {"name": "notes.md", "mimeType": "text/markdown", "buffer": b"# mine\n"}
    )
    page.get_by_test_id("upload-submit").click()
    expect(page.get_by_test_id("upload-done")).to_be_visible()
    dialog = open_restore(page, "at-the-end")
    note = dialog.get_by_test_id("rewind-warning")
    expect(note).to_have_class("warning")
    expect(note).to_have_text(
        "Cuts the branch “main” back to this checkpoint: permanently deletes 0 later messages, "
        "0 later checkpoints, 1 file version written after it (your own upload or edit)."
    )
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    llm.queue(Reply("two"))
    chat(page, "second")
    dialog = open_restore(page, "at-the-end")
    note = dialog.get_by_test_id("rewind-warning")
    expect(note).to_have_class("warning")
    expect(note).to_contain_text("permanently deletes 2 later messages")
    expect(note).to_contain_text("1 file version written after it (your own upload or edit)")


@pytest.mark.parametrize("size", list(SIZES))
def test_shift_tab_from_the_composer_reaches_regenerate_and_edit_and_shows_them(
    page, app, llm, size
):
    width, height = SIZES[size]
    page.set_viewport_size({"width": width, "height": height})
    sign_up(page, app.base_url)
    if size == "phone":
        page.get_by_test_id("toggle-sidebar").click()
    new_session(page)
    llm.queue(Reply("an answer"))
    chat(page, "a question")
    page.get_by_test_id("message-input").focus()
    reached: dict[str, float] = {}
    for _ in range(40):
        page.keyboard.press("Shift+Tab")
        focused = page.evaluate(
            """() => { const el = document.activeElement;
                return [el.getAttribute("data-testid"),
                        Number(getComputedStyle(el.closest(".tools") || el).opacity)]; }"""
        )
        if focused[0] in ("regenerate", "edit-message"):
            reached[focused[0]] = focused[1]
        if len(reached) == 2:
            break
    # Both are reached, and shown (not transparent) while they hold the focus.
    assert reached == {"regenerate": 1.0, "edit-message": 1.0}
