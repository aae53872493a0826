"""How a turn's end looks, in Chromium, at 1366 and 390 px wide, in the light and dark schemes:
a stopped reply (the Stop button or Esc) is at once in its final form in every open tab (no
streaming cursor, its time, Copy and Regenerate, the header's count), without a reload; user text
is shown as typed while model text stays Markdown; Continue extends a cut-off reply in place."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from agents.history import CONTINUE_INSTRUCTION
from tests.fakes.chat_server import Reply

from .conftest import (
    FINISHED_ASSISTANT,
    USER_MESSAGE,
    message_texts,
    new_session,
    send_message,
    sign_up,
    wait_turn_done,
    wait_ws_open,
)
from .test_accessibility import violations

pytestmark = pytest.mark.e2e

VIEWS = [(1366, 900, "light"), (1366, 900, "dark"), (390, 844, "light"), (390, 844, "dark")]
LONG = " ".join(f"word{i}" for i in range(60))  # 60 chunks, 0.3 s apart: 18 s unless stopped


def open_session(contexts, app, width: int, height: int, scheme: str):
    """A new user's new session (made at full width, where the sidebar shows), then seen at
    `width` in `scheme`."""
    page = contexts.new().new_page()
    page.emulate_media(color_scheme=scheme)
    sign_up(page, app.base_url)
    new_session(page)
    page.set_viewport_size({"width": width, "height": height})
    return page


def in_every_view(page, check) -> None:
    """Run `check` at both widths in both schemes, and axe: no serious or critical violation."""
    for width, height, scheme in VIEWS:
        page.set_viewport_size({"width": width, "height": height})
        page.emulate_media(color_scheme=scheme)
        check()
        found = violations(page)
        assert not found, f"{width} px, {scheme}: " + json.dumps(found, indent=1)


def assert_final(page) -> None:
    """The stopped reply as a stored message: badge, time, Copy, Regenerate, no cursor."""
    expect(page.locator("#messages [data-streaming=true]")).to_have_count(0)
    expect(page.locator("#messages .streaming")).to_have_count(0)
    reply = page.locator(FINISHED_ASSISTANT)
    expect(reply).to_have_count(1)
    expect(reply.get_by_test_id("stopped-badge")).to_be_visible()
    expect(reply.locator("time")).to_be_visible()
    expect(reply.get_by_test_id("copy-message")).to_be_visible()
    expect(reply.get_by_test_id("regenerate")).to_have_count(1)
    expect(page.get_by_test_id("current-branch")).to_contain_text("2 messages")
    expect(page.get_by_test_id("stop")).to_have_count(0)


@pytest.mark.parametrize(
    ("width", "height", "scheme", "how"),
    [(1366, 900, "light", "button"), (390, 844, "dark", "esc")],
)
def test_a_stopped_reply_is_final_at_once_in_every_tab(
    contexts, app, llm, width, height, scheme, how
):
    page = open_session(contexts, app, width, height, scheme)
    other = page.context.new_page()  # a second tab on the same conversation
    other.emulate_media(color_scheme=scheme)
    other.goto(page.url)
    wait_ws_open(other)

    llm.queue(Reply(LONG, delay=0.3))
    send_message(page, "tell me a long story")
    for tab in (page, other):
        expect(tab.locator("#messages [data-streaming=true] .body")).to_contain_text("word2")
    expect(page.get_by_test_id("current-branch")).to_contain_text("1 message")
    if how == "button":
        page.get_by_test_id("stop").click()
    else:
        page.get_by_test_id("message-input").press("Escape")

    for tab in (page, other):
        assert_final(tab)
    shown = [message_texts(tab, "assistant") for tab in (page, other)]
    assert shown[0] == shown[1]
    assert len(shown[0]) == 1
    assert LONG.startswith(shown[0][0])
    assert shown[0][0] != LONG
    # Nothing the worker sent after the stop shows up later.
    page.wait_for_timeout(1200)
    assert message_texts(other, "assistant") == shown[0]
    # The stored reply is the one shown: the same after a reload.
    other.reload()
    assert message_texts(other, "assistant") == shown[0]
    in_every_view(page, lambda: assert_final(page))


TYPED = "# not a heading\ncall(*args, **kwargs)\n    indented = True\n" + "x" * 300


@pytest.mark.parametrize(("width", "height", "scheme"), [(1366, 900, "dark"), (390, 844, "light")])
def test_user_text_is_shown_as_typed_and_model_text_as_markdown(
    contexts, app, llm, width, height, scheme
):
    page = open_session(contexts, app, width, height, scheme)
    llm.queue(Reply("# Title\n\nSome **bold** text."))
    wait_turn_done(page, send_message(page, TYPED))

    def check() -> None:
        user = page.locator(f"{USER_MESSAGE} .body")
        assert user.inner_text() == TYPED  # whitespace, line breaks, asterisks, hashes kept
        expect(user.locator("h1, em, strong")).to_have_count(0)
        # The long line wraps inside the bubble: no sideways scroll.
        assert user.evaluate("b => b.scrollWidth <= b.clientWidth + 1")
        reply = page.locator(f"{FINISHED_ASSISTANT} .body")
        expect(reply.locator("h1")).to_have_text("Title")
        expect(reply.locator("strong")).to_have_text("bold")

    in_every_view(page, check)
    page.reload()  # the same when loaded
    check()


@pytest.mark.parametrize(("width", "height", "scheme"), [(1366, 900, "light"), (390, 844, "dark")])
def test_continue_extends_the_cut_off_reply_in_place(contexts, app, llm, width, height, scheme):
    page = open_session(contexts, app, width, height, scheme)
    start = " ".join(f"point{i}" for i in range(40))
    llm.queue(
        Reply(start, chunk_size=10, finish_reason="length"),
        Reply(" more1 more2 more3 more4 more5", delay=0.3, finish_reason="length"),
        Reply(" and the end."),
    )
    wait_turn_done(page, send_message(page, "tell me everything"))
    expect(page.get_by_test_id("cutoff-badge")).to_have_count(1)
    in_every_view(page, lambda: expect(page.get_by_test_id("continue")).to_be_visible())

    page.get_by_test_id("continue").click()
    # It streams into the same reply: one assistant bubble, the earlier text first.
    bubble = page.locator("#messages [data-streaming=true] .body")
    expect(bubble).to_contain_text("more2")
    assert bubble.inner_text().startswith("point0")
    expect(page.locator("#messages [data-role=assistant]")).to_have_count(1)
    # Cut off again: Continue is offered again, on the same reply.
    expect(page.get_by_test_id("continue")).to_be_visible(timeout=20_000)
    expect(page.locator("#messages [data-streaming=true]")).to_have_count(0)
    page.get_by_test_id("continue").click()
    expect(page.locator(f"{FINISHED_ASSISTANT} .body")).to_contain_text("and the end.")
    expect(page.get_by_test_id("continue")).to_have_count(0)
    expect(page.get_by_test_id("cutoff-badge")).to_have_count(0)

    texts = message_texts(page)
    assert len(texts) == 2  # no "Continue." message: the question and one reply
    assert texts[0] == "tell me everything"
    assert texts[1].startswith(start)
    assert texts[1].endswith("more5 and the end.")
    assert "cut off here" not in texts[1]
    # The model got its cut-off reply back, then the request to go on (never shown).
    asked = [(m["role"], m["content"]) for m in llm.messages(-1) if m["role"] != "system"]
    assert asked[-1] == ("user", CONTINUE_INSTRUCTION)
    assert asked[-2][0] == "assistant"
    assert asked[-2][1].startswith(start)
    assert asked[-2][1].endswith("more5")
    expect(page.get_by_test_id("current-branch")).to_contain_text("4 messages")
    page.reload()
    assert message_texts(page) == texts


def test_an_answer_older_than_the_state_shown_is_not_swapped_over_it(contexts, app, llm):
    # CI saw it: Continue's answer (the page as it was before the turn was claimed: a bubble
    # for attempt 0) came back after the refresh that the turn's start asked for (the bubble
    # for attempt 1), was swapped over it, and the reply's pieces had no bubble to go to until
    # the turn ended. Here Continue is answered, once the turn streams, with the page as the
    # server rendered it before the click: older than what the page shows by then.
    page = open_session(contexts, app, 1366, 900, "light")
    start = " ".join(f"point{i}" for i in range(10))
    more = "".join(f" more{i}" for i in range(1, 31))  # 30 chunks, 0.2 s apart: about 6 s
    llm.queue(Reply(start, finish_reason="length"), Reply(more, delay=0.2))
    wait_turn_done(page, send_message(page, "tell me everything"))
    refresh_url = page.locator("#live-refresh").get_attribute("hx-get")
    before = page.request.get(f"{app.base_url}{refresh_url}").text()
    assert 'data-testid="continue"' in before
    held = []

    def hold(route):
        route.fetch()  # Continue is done; its answer is held back
        held.append(route)

    page.route("**/continue/", hold)
    page.get_by_test_id("continue").click()
    streaming = page.locator("#messages [data-streaming=true] .body")
    expect(streaming).to_contain_text("more2")  # the turn's start's refresh brought the bubble
    [route] = held
    route.fulfill(status=200, content_type="text/html; charset=utf-8", body=before)

    # The older answer is not swapped in: the bubble goes on streaming to the reply's end.
    expect(streaming).to_contain_text("more20")
    expect(page.get_by_test_id("continue")).to_have_count(0)
    expect(page.locator(f"{FINISHED_ASSISTANT} .body")).to_contain_text("more30")
    assert message_texts(page)[-1].endswith("more29 more30")
