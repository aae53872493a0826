"""Streaming in a real browser: a long reply only grows, a reload or a new tab mid-reply shows the
reply so far and then the rest, and Markdown is formatted while it streams, model HTML inert."""

from __future__ import annotations

import itertools

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import (
    last_reply,
    new_session,
    send_message,
    sign_up,
    wait_turn_done,
)
from tests.fakes.chat_server import Reply

pytestmark = pytest.mark.e2e

BODY = "[data-streaming=true] .body"

# Samples, every 50 ms, the length of the text of the bubble being streamed.
SAMPLE_LENGTHS = """() => {
    window.__lengths = [];
    window.__sampler = setInterval(() => {
        const body = document.querySelector("[data-streaming=true] .body");
        if (body) window.__lengths.push(body.textContent.length);
    }, 50);
}"""
STOP_SAMPLING = "() => { clearInterval(window.__sampler); return window.__lengths; }"


def words(n: int) -> str:
    return " ".join(f"word{i}" for i in range(n))


def streamed_text(page) -> str:
    # Markdown's renderers end a paragraph with a line break, which the server's and the page's
    # renderings may or may not keep: the words are what the reader sees.
    return (page.locator(BODY).text_content() or "").strip()


def test_a_reply_streaming_for_30_seconds_keeps_growing_and_never_shrinks(page, app, llm):
    sign_up(page, app.base_url)
    new_session(page)
    final = words(150)
    llm.queue(Reply(final, delay=0.2))  # 30 s: past the composer's 20 s refresh
    before = send_message(page, "a long one")
    expect(page.locator(BODY)).not_to_have_text("")
    page.evaluate(SAMPLE_LENGTHS)
    wait_turn_done(page, before, timeout=90_000)
    lengths = page.evaluate(STOP_SAMPLING)
    assert len(lengths) > 100, lengths  # sampled through most of the 30 s
    shrunk = [(a, b) for a, b in itertools.pairwise(lengths) if b < a]
    assert not shrunk, shrunk
    assert lengths[-1] > lengths[0]
    assert last_reply(page) == final


def test_a_reload_and_a_new_tab_mid_reply_show_the_reply_so_far_then_the_rest(
    page, app, llm, contexts
):
    sign_up(page, app.base_url)
    new_session(page)
    final = words(80)
    llm.queue(Reply(final, delay=0.15))  # 12 s
    before = send_message(page, "go on")
    page.wait_for_function(
        "() => { const b = document.querySelector('[data-streaming=true] .body');"
        " return b && b.textContent.length > 90; }"  # the cached reply so far lags by < 0.3 s
    )
    url = page.url

    other = page.context.new_page()  # a second tab, opened mid-reply
    other.goto(url, wait_until="domcontentloaded")
    first_seen_there = streamed_text(other)
    page.reload(wait_until="domcontentloaded")
    first_seen_here = streamed_text(page)
    for shown in (first_seen_there, first_seen_here):
        assert len(shown) > 60, shown
        assert final.startswith(shown), shown  # the reply so far, as it was

    for tab, first in ((page, first_seen_here), (other, first_seen_there)):
        tab.wait_for_function(  # it continues from there
            "(first) => { const b = document.querySelector('[data-streaming=true] .body');"
            " return b && b.textContent.length > first.length; }",
            arg=first,
        )
        assert final.startswith(streamed_text(tab))  # nothing lost, nothing doubled
    for tab in (page, other):
        wait_turn_done(tab, {"users": before["users"], "assistants": before["assistants"]})
        assert last_reply(tab) == final


MARKDOWN = (
    "Here is **bold text** and a list:\n\n- first item\n- second item\n\n"
    "```\nprint(1)\n```\n\n"
    "<img src=x onerror=alert(1)> <script>alert(2)</script> [x](javascript:alert(3))\n\n"
)


def test_markdown_is_formatted_while_streaming_and_model_html_stays_inert(page, app, llm):
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    sign_up(page, app.base_url)
    new_session(page)
    llm.queue(Reply(MARKDOWN + words(40), delay=0.15))
    before = send_message(page, "format")

    bubble = page.locator(BODY)
    expect(bubble.locator("strong")).to_have_text("bold text")
    expect(bubble.locator("li")).to_have_count(2)
    expect(bubble.locator("pre code")).to_have_text("print(1)\n")
    expect(bubble).to_contain_text("<img src=x onerror=alert(1)>")  # shown as text
    expect(page.locator("[data-streaming=true]")).to_have_count(1)  # still streaming
    inert = """() => [...document.querySelectorAll("#messages *")].filter(
        (e) => [...e.attributes].some((a) => /^on/i.test(a.name))
            || ["IMG", "SCRIPT"].includes(e.tagName)
            || /^\\s*javascript:/i.test(e.getAttribute("href") || "")).length"""
    assert page.evaluate(inert) == 0

    wait_turn_done(page, before)
    assert page.evaluate(inert) == 0
    assert dialogs == []


# Counts the chat socket's frames that carry a streamed piece (whether or not a bubble took it).
COUNT_PIECE_FRAMES = """() => {
    window.__pieceFrames = 0;
    document.addEventListener("htmx:wsBeforeMessage", (e) => {
        const m = e.detail && e.detail.message;
        if (typeof m === "string" && m.includes('class="delta"')) window.__pieceFrames += 1;
    });
}"""


def test_a_bubble_swapped_in_after_pieces_it_missed_still_starts_with_the_reply(page, app, llm):
    """Seen once under load: a reply's bubble comes with the page's refresh (after the turn's
    start), rendered with the reply so far at one moment and swapped in later; the pieces the
    socket brought in between had no bubble to go to, and the next one was added after the
    gap: the bubble no longer started with the reply's first words. A loaded server is played
    here by holding that refresh's answer until the socket has brought pieces past it."""
    sign_up(page, app.base_url)
    new_session(page)
    final = words(80)
    llm.queue(Reply(final, delay=0.1))  # 8 s
    held: list = []

    def hold_the_first(route) -> None:
        if held:
            route.continue_()
        else:  # rendered now, with the reply so far as it is now; answered later
            held.append((route, route.fetch()))

    page.route("**/refresh/", hold_the_first)
    page.evaluate(COUNT_PIECE_FRAMES)
    before = send_message(page, "go on")
    page.wait_for_function("() => window.__pieceFrames >= 8")  # no bubble for them yet
    route, answer = held[0]
    route.fulfill(response=answer)
    page.wait_for_function(  # the bubble is in, and the reply goes on streaming into it
        "() => { const b = document.querySelector('[data-streaming=true] .body');"
        " return b && b.textContent.length > 150; }"
    )
    shown = streamed_text(page)
    assert final.startswith(shown), shown  # from its first words, with nothing missing
    wait_turn_done(page, before)
    assert last_reply(page) == final


# Records the streamed bubble's text at every change of the page (a morph included), before the
# page's next frame could mend it.
RECORD_CHANGES = """() => {
    window.__changes = [];
    window.__changeWatch = new MutationObserver(() => {
        const body = document.querySelector("[data-streaming=true] .body");
        if (body) window.__changes.push(body.textContent);
    });
    window.__changeWatch.observe(
        document.body, {childList: true, subtree: true, characterData: true});
}"""
STOP_RECORDING = "() => { window.__changeWatch.disconnect(); return window.__changes; }"
REFRESH = """() => { const r = document.getElementById("live-refresh");
    htmx.ajax("GET", r.getAttribute("hx-get"), {source: r, swap: "none"}); }"""


def test_a_refresh_rendered_before_the_latest_pieces_never_takes_the_bubble_back(page, app, llm):
    """Seen once under load: a live refresh morphed the streaming bubble's body into the server's
    rendering of the reply so far, older than what the page showed (and, with the same text, the
    server's rendering rather than the page's, until the next piece). A loaded server is played
    here by holding a refresh's answer until the socket has brought more pieces."""
    sign_up(page, app.base_url)
    new_session(page)
    final = words(80)
    llm.queue(Reply(final, delay=0.1))  # 8 s
    before = send_message(page, "go on")
    page.wait_for_function(
        "() => { const b = document.querySelector('[data-streaming=true] .body');"
        " return b && b.textContent.length > 60; }"
    )
    held: list = []

    def hold(route) -> None:
        if held:
            route.continue_()
        else:
            held.append((route, route.fetch()))  # rendered now, answered later

    shown = len(streamed_text(page))
    page.route("**/refresh/", hold)
    page.evaluate(REFRESH)
    page.wait_for_function(  # the page moves on, a second past the held snapshot
        "(n) => document.querySelector('[data-streaming=true] .body').textContent.length > n + 60",
        arg=shown,
    )
    assert held, "the refresh was not asked for"
    page.evaluate(RECORD_CHANGES)
    route, answer = held[0]
    route.fulfill(response=answer)
    wait_turn_done(page, before)
    changes = page.evaluate(STOP_RECORDING)
    assert changes, "the bubble did not change after the refresh"
    assert all(final.startswith(text) for text in changes), changes
    lengths = [len(text) for text in changes]
    assert lengths == sorted(lengths), lengths
    assert last_reply(page) == final
