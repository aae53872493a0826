"""How a turn ended, as a user sees it in Chromium: a reply cut off by the length limit is badged
and continued with one click, and the header's context gauge follows the conversation."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agents.history import CONTINUE_INSTRUCTION
from tests.fakes.chat_server import Reply

from .conftest import (
    FINISHED_ASSISTANT,
    conversation,
    message_texts,
    new_session,
    send_message,
    sign_up,
    wait_turn_done,
)

pytestmark = pytest.mark.e2e


def gauge_percent(page) -> int:
    text = page.get_by_test_id("context-gauge").inner_text()
    found = re.search(r"context (\d+)%", text)
    assert found is not None, text
    return int(found.group(1))


def test_a_cut_off_reply_is_badged_and_continued_and_the_gauge_follows(page, app, llm):
    sign_up(page, app.base_url)
    new_session(page)
    expect(page.get_by_test_id("context-gauge")).to_be_visible()
    empty = gauge_percent(page)

    long_text = " ".join(f"point{i}" for i in range(400))
    llm.queue(Reply(long_text, chunk_size=50, finish_reason="length"), Reply("and the end."))
    before = send_message(page, "tell me everything " * 1000)
    wait_turn_done(page, before)

    expect(page.get_by_test_id("cutoff-badge")).to_have_count(1)
    # The page updated live: more of the window is used now.
    expect(page.get_by_test_id("context-gauge")).not_to_have_text(f"context {empty}%")
    assert gauge_percent(page) > empty

    page.get_by_test_id("continue").click()
    # Extended in place (tests/e2e/test_turn_ends.py): the same reply, no "Continue." message.
    expect(page.locator(f"{FINISHED_ASSISTANT} .body")).to_contain_text("and the end.")
    expect(page.get_by_test_id("continue")).to_have_count(0)  # the last reply finished
    texts = message_texts(page)
    assert len(texts) == 2
    assert texts[-1].endswith("and the end.")
    # The model got the cut-off reply back, then the request to go on.
    (role, text), asked = conversation(llm.messages(-1))[-2:]
    assert role == "assistant"
    assert text.startswith(long_text)
    assert asked == ("user", CONTINUE_INSTRUCTION)
