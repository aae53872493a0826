"""How messages look and what they offer, in Chromium: highlighted code under its language with a
copy button, a copy button on every message (visible and reachable without a mouse), tables and
long lines that stay inside the conversation, links that open a new tab (while streaming too),
and a composer that says when a draft is over the length limit instead of cutting it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import (
    FINISHED_ASSISTANT,
    USER_MESSAGE,
    chat,
    counts,
    new_session,
    send_message,
    sign_up,
    wait_turn_done,
)

pytestmark = pytest.mark.e2e

CODE = "def greet(name):\n    print('hi', name)  # " + "x" * 400 + "\n"
REPLY = (
    "Here you go:\n\n"
    f"```python\n{CODE}```\n\n"
    "| item | price |\n|:-----|------:|\n| tea | 3.50 |\n\n"
    "> a quote\n\n"
    "More at https://example.com/docs and [the guide](https://example.org/guide)."
)
LIMIT = 32_000  # AGENT_MAX_INPUT_CHARS's default, which the served app uses


@pytest.fixture
def clip_page(contexts, app):
    """A page that may read and write the clipboard, 1366 px wide."""
    page = contexts.new(permissions=["clipboard-read", "clipboard-write"]).new_page()
    page.set_viewport_size({"width": 1366, "height": 900})
    return page


def clipboard(page) -> str:
    return page.evaluate("() => navigator.clipboard.readText()")


def test_a_reply_shows_highlighted_code_tables_and_links_and_copies(clip_page, app, llm):
    page = clip_page
    sign_up(page, app.base_url)
    new_session(page)
    llm.queue(Reply(REPLY))
    chat(page, "show me\nplease")

    reply = page.locator(FINISHED_ASSISTANT).last
    block = reply.locator(".body .codeblock")
    expect(block.locator(".codeblock-lang")).to_have_text("python")
    expect(block.locator("pre code span.k")).to_have_text(["def"])
    # The light theme's colour for a keyword, not the text's.
    keyword = block.locator("span.k").evaluate("e => getComputedStyle(e).color")
    plain = block.locator("pre code").evaluate("e => getComputedStyle(e).color")
    assert keyword != plain

    # The code's copy button is there without hovering, and copies the code as written.
    page.mouse.move(1, 1)
    copy_code = block.get_by_test_id("copy-code")
    expect(copy_code).to_be_visible()
    expect(copy_code).to_have_attribute("aria-label", "Copy the python code")
    copy_code.click()
    expect(copy_code).to_have_text("Copied")
    assert clipboard(page) == CODE

    # Every message has a copy button, visible without hovering; it copies the message's text.
    page.mouse.move(1, 1)
    copy_reply = reply.get_by_test_id("copy-message")
    expect(copy_reply).to_be_visible()
    copy_reply.click()
    assert clipboard(page) == REPLY
    copy_question = page.locator(USER_MESSAGE).last.get_by_test_id("copy-message")
    expect(copy_question).to_be_visible()
    copy_question.focus()  # reachable from the keyboard
    page.keyboard.press("Enter")
    expect(copy_question).to_have_text("Copied")
    assert clipboard(page) == "show me\nplease"  # as typed, line break included

    # A 400-character line scrolls inside its block; the page is no wider than the window.
    widths = page.evaluate(
        """() => ({page: document.documentElement.scrollWidth, window: window.innerWidth})"""
    )
    assert widths["page"] <= widths["window"], widths
    pre = block.locator("pre").evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert pre[0] > pre[1], pre

    # The table has borders and keeps its right-aligned column.
    price = reply.locator("td.align-right")
    expect(price).to_have_text("3.50")
    assert price.evaluate("e => getComputedStyle(e).textAlign") == "right"
    assert price.evaluate("e => getComputedStyle(e).borderTopStyle") == "solid"
    quote = reply.locator("blockquote")
    assert quote.evaluate("e => getComputedStyle(e).borderLeftStyle") == "solid"

    # The bare address and the link open a new tab, without giving it this page.
    links = reply.locator(".body a")
    expect(links).to_have_count(2)
    for i in range(2):
        expect(links.nth(i)).to_have_attribute("target", "_blank")
        assert "noopener" in (links.nth(i).get_attribute("rel") or "").split()
    assert links.nth(0).get_attribute("href") == "https://example.com/docs"


def test_a_streaming_reply_labels_its_code_and_opens_links_in_a_new_tab(page, app, llm):
    sign_up(page, app.base_url)
    new_session(page)
    text = "See https://example.com/x now.\n\n```python\nprint(1)\n```\n\n" + " ".join(
        f"word{i}" for i in range(40)
    )
    llm.queue(Reply(text, delay=0.15))
    before = send_message(page, "stream it")
    body = page.locator("[data-streaming=true] .body")
    expect(body.locator(".codeblock-lang")).to_have_text("python")
    expect(body.locator("a")).to_have_attribute("target", "_blank")
    assert "noopener" in (body.locator("a").get_attribute("rel") or "").split()
    expect(page.locator("[data-streaming=true]")).to_have_count(1)  # seen while streaming
    wait_turn_done(page, before)
    final = page.locator(FINISHED_ASSISTANT).last
    expect(final.locator(".codeblock-lang")).to_have_text("python")
    expect(final.locator("span.nb")).to_have_text("print")  # highlighted once finished
    expect(final.locator(".body a")).to_have_attribute("target", "_blank")


def test_a_draft_over_the_limit_is_kept_whole_and_not_sent(clip_page, app, llm):
    page = clip_page
    sign_up(page, app.base_url)
    new_session(page)
    box = page.get_by_test_id("message-input")
    send = page.get_by_test_id("send")
    note = page.get_by_test_id("char-limit")
    expect(note).to_be_hidden()

    # A paste of 40,000 characters is kept whole (no cut at 32,000) and refused.
    page.evaluate("(n) => navigator.clipboard.writeText('a'.repeat(n))", 40_000)
    box.focus()
    page.keyboard.press("Control+V")
    assert box.evaluate("e => e.value.length") == 40_000
    expect(note).to_be_visible()
    expect(note).to_have_text(
        "This message is 8,000 characters over the limit of 32,000. Shorten it to send it."
    )
    expect(send).to_be_disabled()
    before = counts(page)
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.url.endswith("/send/") else None)
    box.press("Enter")
    page.wait_for_timeout(300)
    assert sent == []
    assert counts(page) == before
    assert box.evaluate("e => e.value.length") == 40_000  # the draft is still there

    # Near the limit it counts; within it, the message can be sent.
    box.fill("b" * 31_000)
    expect(note).to_have_text("31,000 / 32,000 characters")
    expect(send).to_be_enabled()
    box.fill("short")
    expect(note).to_be_hidden()
    llm.queue(Reply("fine"))
    wait_turn_done(page, send_message(page, "short"))


def test_a_refresh_that_morphs_the_reply_keeps_its_code_copy_button_and_its_copied(
    clip_page, app, llm
):
    """The code's copy button is the page's own: a live refresh arriving just after a click (a
    new title, an event of another tab) once took it away and put a fresh "Copy" in its place."""
    page = clip_page
    sign_up(page, app.base_url)
    new_session(page)
    llm.queue(Reply(REPLY))
    chat(page, "show me")
    copy_code = page.locator(FINISHED_ASSISTANT).last.get_by_test_id("copy-code")
    copy_code.click()
    expect(copy_code).to_have_text("Copied")
    copy_code.evaluate("b => { b.dataset.clicked = 'yes'; }")

    with page.expect_response(lambda r: "/refresh" in r.url) as refreshed:
        page.evaluate(  # as the page fetches it after an event (live.js)
            """() => { const r = document.getElementById('live-refresh');
            htmx.ajax('GET', r.getAttribute('hx-get'), {source: r, swap: 'none'}); }"""
        )
    assert refreshed.value.ok
    page.wait_for_function(  # the refresh's regions swapped in, morphing the messages
        "() => !document.querySelector('.htmx-settling, .htmx-swapping')"
    )

    expect(copy_code).to_have_count(1)
    expect(copy_code).to_have_attribute("data-clicked", "yes")  # the same button
