"""The chat a demanding user lives in (part A): an ended login leads to the whole sign-in page and
back, with nothing typed lost; drafts per session; sending brings the message into view; the edit
form's keys and focus; keyboard shortcuts and their sheet; a background tab marked when a reply
ends. Each at 1366 and 390 px wide, in the light and the dark scheme."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Error, Reply

from .conftest import (
    PASSWORD,
    USER_MESSAGE,
    chat,
    last_reply,
    new_session,
    save_checkpoint,
    send_message,
    session_id,
    sign_up,
    wait_turn_done,
    wait_ws_open,
)
from .test_accessibility import violations
from .test_live import import_session

pytestmark = pytest.mark.e2e

WIDE, NARROW = {"width": 1366, "height": 900}, {"width": 390, "height": 844}
# Every size in every scheme.
LOOKS = [(WIDE, "light"), (WIDE, "dark"), (NARROW, "light"), (NARROW, "dark")]


def look(page, size, scheme) -> None:
    page.set_viewport_size(size)
    page.emulate_media(color_scheme=scheme)


def sign_in(page, username: str) -> None:
    """On the login page: sign in, and land where `next` says."""
    expect(page.get_by_test_id("login-return")).to_be_visible()
    page.get_by_test_id("username").fill(username)
    page.get_by_test_id("password").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_test_id("submit").click()


def on_login_for(page, sid: int) -> None:
    slash = "(/|%2F)"
    page.wait_for_url(re.compile(rf"/accounts/login/\?next={slash}chat{slash}{sid}{slash}$"))
    expect(page.locator("#messages")).to_have_count(0)  # the whole page, not a fragment


def test_an_ended_login_leads_to_the_whole_sign_in_page_and_back_with_the_draft(contexts, app, llm):
    context = contexts.new()
    page = context.new_page()
    username = sign_up(page, app.base_url)
    sid = new_session(page)
    for n, (size, scheme) in enumerate(LOOKS):
        look(page, size, scheme)
        draft = f"draft {n}: keep me\n  indented"
        # The login expired (its cookie gone): Send leads to the sign-in, not into the column.
        box = page.get_by_test_id("message-input")
        box.fill(draft)
        # The login cookie gone (expired), or every cookie (the CSRF one too).
        context.clear_cookies(**({"name": "sessionid"} if n % 2 == 0 else {}))
        with page.expect_navigation():
            box.press("Enter")
        on_login_for(page, sid)
        sign_in(page, username)
        page.wait_for_url(f"{app.base_url}/chat/{sid}/")
        wait_ws_open(page)
        expect(page.get_by_test_id("message-input")).to_have_value(draft)
        expect(page.get_by_test_id("send")).to_be_enabled()
    assert llm.requests == []  # nothing was sent while signed out

    # Save checkpoint with the login gone: the sign-in is the whole page, not the panel.
    for size in (WIDE, NARROW):
        look(page, size, "light")
        if size is NARROW:
            page.get_by_test_id("toggle-panel").click()
        page.get_by_test_id("checkpoint-name").fill("before")
        context.clear_cookies()
        with page.expect_navigation():
            page.get_by_test_id("save-checkpoint").click()
        on_login_for(page, sid)
        sign_in(page, username)
        page.wait_for_url(f"{app.base_url}/chat/{sid}/")
        wait_ws_open(page)


def test_logging_out_in_another_tab_leads_this_one_to_the_sign_in_and_back(contexts, app, llm):
    context = contexts.new()
    page = context.new_page()
    username = sign_up(page, app.base_url)
    sid = new_session(page)
    for size, scheme in ((WIDE, "dark"), (NARROW, "light")):
        look(page, size, scheme)
        page.get_by_test_id("message-input").fill(f"typed at {size['width']}")
        other = context.new_page()
        other.goto(page.url)
        wait_ws_open(other)
        other.evaluate("() => document.querySelector('[data-testid=logout]').form.submit()")
        other.wait_for_url(re.compile(r"/accounts/login/$"))
        on_login_for(page, sid)  # this tab's socket was closed: the page went to the sign-in
        other.close()
        sign_in(page, username)
        wait_ws_open(page)
        expect(page.get_by_test_id("message-input")).to_have_value(f"typed at {size['width']}")


# Keeps the page's sockets and its htmx socket wrapper within the test's reach.
KEEP_SOCKETS = """
(function () {
  var Native = window.WebSocket;
  window.__rbSockets = [];
  function Kept(url, protocols) {
    var socket = protocols === undefined ? new Native(url) : new Native(url, protocols);
    window.__rbSockets.push(socket);
    return socket;
  }
  Kept.prototype = Native.prototype;
  ["CONNECTING", "OPEN", "CLOSING", "CLOSED"].forEach(function (k) { Kept[k] = Native[k]; });
  window.WebSocket = Kept;
  document.addEventListener("htmx:wsOpen", function (e) {
    window.__rbWrapper = e.detail.socketWrapper;
  });
})();
"""


def test_a_socket_back_after_its_login_ended_leads_to_the_sign_in_and_back(contexts, app, llm):
    """The page's socket was away (a restart, an outage's 4503) when its login ended in another
    tab: the handshake it opens again is refused with 4401, and the page goes to the sign-in. (A
    refused handshake is a bare 1006 to a browser, which htmx's ws extension retries for ever.)"""
    context = contexts.new()
    context.add_init_script(KEEP_SOCKETS)
    page = context.new_page()
    username = sign_up(page, app.base_url)
    sid = new_session(page)
    for size, scheme in ((NARROW, "dark"), (WIDE, "light")):
        look(page, size, scheme)
        wait_ws_open(page)
        page.get_by_test_id("message-input").fill(f"typed while away at {size['width']}")
        page.evaluate("() => window.__rbSockets[window.__rbSockets.length - 1].close()")
        page.wait_for_function("() => window.__e2eWsOpen === 0")  # away: it hears no close
        other = context.new_page()
        other.goto(page.url)
        wait_ws_open(other)
        other.evaluate("() => document.querySelector('[data-testid=logout]').form.submit()")
        other.wait_for_url(re.compile(r"/accounts/login/$"))
        other.close()
        expect(page.get_by_test_id("message-input")).to_be_visible()  # nothing told this tab
        page.evaluate("() => window.__rbWrapper.reconnect()")
        on_login_for(page, sid)
        sign_in(page, username)
        wait_ws_open(page)
        expect(page.get_by_test_id("message-input")).to_have_value(
            f"typed while away at {size['width']}"
        )


def test_drafts_are_kept_per_session_and_leave_once_the_message_is_sent(contexts, app, llm):
    context = contexts.new()
    page = context.new_page()
    sign_up(page, app.base_url)
    first = new_session(page)
    save_checkpoint(page, "start")  # no longer blank: "New session" makes another
    second = new_session(page)
    for size, scheme in ((WIDE, "light"), (NARROW, "dark")):
        look(page, size, scheme)
        page.goto(f"{app.base_url}/chat/{first}/")
        page.get_by_test_id("message-input").fill("the first session's draft")
        page.reload()
        expect(page.get_by_test_id("message-input")).to_have_value("the first session's draft")
        page.goto(f"{app.base_url}/chat/{second}/")
        expect(page.get_by_test_id("message-input")).to_have_value("")
        page.goto(f"{app.base_url}/chat/{first}/")
        wait_ws_open(page)
        expect(page.get_by_test_id("message-input")).to_have_value("the first session's draft")
        wait_turn_done(page, send_message(page, "the first session's draft"))
        page.reload()
        expect(page.get_by_test_id("message-input")).to_have_value("")
    # A refused message (over the limit) keeps its draft.
    limit = int(page.get_by_test_id("message-input").get_attribute("data-max-chars"))
    page.get_by_test_id("message-input").fill("x" * (limit + 1))
    page.get_by_test_id("message-input").press("Enter")
    page.reload()
    expect(page.get_by_test_id("message-input")).to_have_value("x" * (limit + 1))


def test_sending_while_scrolled_up_brings_the_message_into_view(contexts, app, llm):
    page = contexts.new(viewport=WIDE).new_page()
    sign_up(page, app.base_url)
    history = [
        {"position": n, "role": "user" if n % 2 == 0 else "assistant", "content": f"history {n}"}
        for n in range(130)
    ]
    import_session(page, history)
    page.get_by_test_id("load-earlier").click()
    expect(page.locator("#messages [data-testid=message]")).to_have_count(130)
    for n, (size, scheme) in enumerate(LOOKS):
        look(page, size, scheme)
        page.evaluate("() => { document.getElementById('messages').scrollTop = 0; }")
        page.wait_for_timeout(100)  # the scroll event: the reader is reading, not following
        text = f"sent from the top {n}"
        before = send_message(page, text)
        mine = page.locator(USER_MESSAGE).filter(has_text=text)
        expect(mine).to_be_in_viewport()
        wait_turn_done(page, before)
        expect(page.locator(USER_MESSAGE).last).to_be_in_viewport()
        expect(page.get_by_test_id("jump-latest")).to_be_hidden()


def test_the_edit_form_takes_esc_and_enter_and_moves_the_focus(contexts, app, llm):
    page = contexts.new().new_page()
    sign_up(page, app.base_url)
    new_session(page)
    for n, (size, scheme) in enumerate(LOOKS):
        look(page, size, scheme)
        chat(page, f"question {n}")
        message = page.locator(USER_MESSAGE).last
        edit = message.get_by_test_id("edit-message")
        message.hover()
        edit.click()
        field = page.get_by_test_id("edit-input")
        expect(field).to_be_focused()
        field.press("Escape")
        expect(page.get_by_test_id("edit-form")).to_have_count(0)
        expect(edit).to_be_focused()
        expect(page.get_by_test_id("stop")).to_have_count(0)

        edit.press("Enter")  # the focus is on it: the keyboard opens the form again
        expect(field).to_be_focused()
        field.fill(f"changed {n}")
        field.press("Shift+Enter")
        field.press_sequentially("second line")
        before = {"assistants": 0, "users": 0}
        with page.expect_response(lambda r: "/resend/" in r.url) as answer:
            field.press("Enter")
        assert answer.value.status == 200
        wait_turn_done(page, before)
        expect(page.locator(USER_MESSAGE).last).to_contain_text("second line")
        assert "\n" in page.locator(USER_MESSAGE).last.locator(".body").inner_text()
        expect(page.get_by_test_id("message-input")).to_be_focused()
        # An edit draft survives a reload, and comes back when the form opens again.
        page.locator(USER_MESSAGE).last.hover()
        page.locator(USER_MESSAGE).last.get_by_test_id("edit-message").click()
        page.get_by_test_id("edit-input").fill(f"half-typed {n}")
        page.reload()
        wait_ws_open(page)
        page.locator(USER_MESSAGE).last.hover()
        page.locator(USER_MESSAGE).last.get_by_test_id("edit-message").click()
        expect(page.get_by_test_id("edit-input")).to_have_value(f"half-typed {n}")
        page.get_by_test_id("edit-input").press("Escape")
        expect(page.get_by_test_id("edit-form")).to_have_count(0)


def test_keyboard_shortcuts_and_their_sheet(contexts, app, llm):
    context = contexts.new()
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app.base_url)
    page = context.new_page()
    sign_up(page, app.base_url)
    new_session(page)
    chat(page, "something to copy")
    # The session's title comes after the first reply, and its live update replaces the
    # sidebar (the search field with it): waited for, so it does not land mid-test.
    expect(page.get_by_test_id("session-link").first).not_to_have_text("New session")
    for size, scheme in LOOKS:
        look(page, size, scheme)
        sheet = page.get_by_test_id("shortcuts-sheet")
        # "?" while typing is a question mark; elsewhere it opens the sheet.
        page.get_by_test_id("message-input").press("?")
        expect(page.get_by_test_id("message-input")).to_have_value("?")
        expect(sheet).to_be_hidden()
        page.get_by_test_id("message-input").fill("")
        page.evaluate("() => document.activeElement.blur()")
        page.keyboard.press("?")
        expect(sheet).to_be_visible()
        expect(sheet).to_contain_text("Copy the last reply")
        assert violations(page) == []
        page.keyboard.press("Escape")
        expect(sheet).to_be_hidden()
        # The visible button opens it too, and the focus goes back to it.
        opener = page.get_by_test_id("composer-shortcuts")
        opener.click()
        expect(sheet).to_be_visible()
        page.get_by_test_id("shortcuts-close").click()
        expect(sheet).to_be_hidden()
        expect(opener).to_be_focused()

        page.keyboard.press("Control+k")
        expect(page.get_by_test_id("session-search")).to_be_focused()
        expect(page.get_by_test_id("session-search")).to_be_visible()
        page.keyboard.press("Shift+Escape")
        expect(page.get_by_test_id("message-input")).to_be_focused()
        expect(page.locator("body")).not_to_have_class(re.compile("sidebar-open"))
        page.evaluate("() => document.activeElement.blur()")
        page.keyboard.press("/")
        expect(page.get_by_test_id("session-search")).to_be_focused()
        if size is NARROW:
            page.keyboard.press("Escape")

        page.evaluate("() => navigator.clipboard.writeText('')")
        page.get_by_test_id("message-input").focus()
        page.keyboard.press("Control+Shift+C")
        page.wait_for_function("async () => (await navigator.clipboard.readText()) !== ''")
        assert page.evaluate("() => navigator.clipboard.readText()").strip() == last_reply(page)

    sid = session_id(page)
    with page.expect_navigation():
        page.keyboard.press("Control+Shift+O")
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    assert session_id(page) != sid


HIDE = """(hidden) => {
    Object.defineProperty(document, "hidden", { configurable: true, get: () => hidden });
    Object.defineProperty(document, "visibilityState", {
        configurable: true, get: () => (hidden ? "hidden" : "visible") });
    document.dispatchEvent(new Event("visibilitychange"));
}"""


def test_a_reply_ending_in_a_background_tab_marks_its_title_and_favicon(contexts, app, llm):
    context = contexts.new()
    page = context.new_page()
    sign_up(page, app.base_url)
    new_session(page)
    # A reply that finishes, then one that fails at once.
    answers = [Reply("one two three four five six", delay=0.2), Error(status=400, message="no")]
    for (size, scheme), answer in zip(((WIDE, "light"), (NARROW, "dark")), answers, strict=True):
        look(page, size, scheme)
        page.evaluate(HIDE, True)
        other = context.new_page()
        other.goto(page.url)
        wait_ws_open(other)
        llm.queue(answer)
        chat(other, "answer while the first tab is away")
        page.wait_for_function("() => document.title.startsWith('● ')")
        marked = page.title()  # the title may have changed meanwhile (the session's new name)
        assert marked.startswith("● ")
        assert marked.endswith(" · Rollback")
        icon = page.locator("link[rel=icon]")
        expect(icon).to_have_attribute("href", re.compile(r"attention.*\.svg$"))
        other.close()
        page.evaluate(HIDE, False)
        # The mark goes, and the title is the session's name as the page shows it now: the
        # first reply's automatic title may come at any moment, before or after this.
        page.wait_for_function(
            "() => document.title === document.querySelector("
            "'#conv-header [data-testid=session-title]').textContent.trim() + ' · Rollback'"
        )
        expect(icon).to_have_attribute("href", re.compile(r"/rollback/icon[^/]*\.svg$"))
