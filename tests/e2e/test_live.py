"""Live updates in a real browser: what a reader types or reads survives events of this tab and of
others, a branch switched elsewhere is followed and announced, the view follows the stream only
from the bottom, "Load earlier" keeps the reading position, times are the reader's."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from checkpoints.transfer_doc import EXPORT_FORMAT, EXPORT_VERSION
from tests.fakes.chat_server import Reply

from .conftest import (
    TURN_TIMEOUT_MS,
    chat,
    current_branch_id,
    new_session,
    open_restore,
    save_checkpoint,
    send_message,
    sign_up,
    wait_turn_done,
    wait_ws_open,
)

pytestmark = pytest.mark.e2e

SCROLL_TOP = "() => document.getElementById('messages').scrollTop"


def second_tab(page):
    """Another tab of the same browser (same login) on the same session page."""
    other = page.context.new_page()
    other.goto(page.url)
    wait_ws_open(other)
    return other


def import_session(page, messages: list[dict], checkpoints: list[dict] | None = None) -> None:
    """Import a one-branch session through the sidebar; lands on its page, live."""
    document = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": {"name": "Imported"},
        "branches": [
            {"id": 1, "is_current": True, "messages": messages, "checkpoints": checkpoints or []}
        ],
    }
    page.get_by_test_id("import-file").set_input_files(
        files=[
            {
                "name": "session.json",
                "mimeType": "application/json",
                "buffer": json.dumps(document).encode(),
            }
        ]
    )
    with page.expect_navigation():
        page.get_by_test_id("import").click()
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    wait_ws_open(page)


def test_typed_fields_and_an_open_edit_form_survive_another_tabs_turn_and_branch_switch(
    page, app, llm
):
    sign_up(page, app.base_url)
    new_session(page)
    chat(page, "one")
    save_checkpoint(page, "after-one")
    chat(page, "two")
    other = second_tab(page)

    # Tab B: a draft, the checkpoint fields, and an open edit form of the first message.
    other.get_by_test_id("message-input").fill("my unsent draft")
    other.get_by_test_id("checkpoint-name").fill("typed name")
    other.get_by_test_id("checkpoint-description").fill("typed description")
    other.locator("#messages [data-role=user]").first.hover()
    other.get_by_test_id("edit-message").first.click()
    edit = other.get_by_test_id("edit-input")
    edit.fill("one, edited")

    def tab_b_kept_everything() -> None:
        expect(other.get_by_test_id("message-input")).to_have_value("my unsent draft")
        expect(other.get_by_test_id("checkpoint-name")).to_have_value("typed name")
        expect(other.get_by_test_id("checkpoint-description")).to_have_value("typed description")
        expect(other.get_by_test_id("edit-form")).to_have_count(1)
        expect(other.get_by_test_id("edit-input")).to_have_value("one, edited")

    # Tab A sends a turn: tab B shows it, and keeps what it had.
    chat(page, "three")
    expect(other.locator("#messages [data-role=user]")).to_have_count(3)
    expect(other.locator("#messages [data-role=assistant]").last).to_have_text(
        re.compile("Echo: three")
    )
    tab_b_kept_everything()
    expect(other.get_by_test_id("send")).to_be_enabled()  # the kept draft can be sent

    # Tab A restores a checkpoint as a new branch: tab B follows it, says so, keeps the rest.
    main = current_branch_id(page)
    dialog = open_restore(page, "after-one")
    dialog.get_by_test_id("confirm-restore").click()
    expect(page.get_by_test_id("current-branch")).not_to_have_attribute("data-branch-id", main)
    branch = current_branch_id(page)
    expect(other.get_by_test_id("current-branch")).to_have_attribute("data-branch-id", branch)
    expect(other.get_by_test_id("branch-notice")).to_be_visible()
    expect(other.get_by_test_id("branch-notice")).to_contain_text("from “after-one”")
    expect(other.locator("#messages [data-role=user]")).to_have_count(1)
    tab_b_kept_everything()
    # The tab that switched says nothing about "elsewhere".
    expect(page.get_by_test_id("branch-notice")).to_have_count(0)


def test_a_reader_scrolled_up_stays_put_while_a_reply_streams_and_can_jump_to_the_latest(
    page, app, llm
):
    sign_up(page, app.base_url)
    new_session(page)
    page.set_viewport_size({"width": 1280, "height": 560})  # a small window: the reply overflows
    llm.queue(Reply("\n\n".join(f"Line{n}." for n in range(30))))
    chat(page, "a long answer please")
    jump = page.get_by_test_id("jump-latest")
    expect(jump).to_be_hidden()  # at the bottom

    llm.queue(Reply(" ".join(f"word{n}" for n in range(40)), delay=0.1))
    before = send_message(page, "now slowly")
    body = page.locator("[data-streaming=true] .body")
    expect(body).to_contain_text("word1")
    page.evaluate("() => { document.getElementById('messages').scrollTop = 200; }")
    top = page.evaluate(SCROLL_TOP)
    assert top == 200
    expect(jump).to_be_visible()

    expect(body).to_contain_text("word12")  # more deltas arrived
    assert page.evaluate(SCROLL_TOP) == top
    wait_turn_done(page, before)  # and the finished reply replaced the streaming bubble
    assert page.evaluate(SCROLL_TOP) == top
    expect(jump).to_be_visible()

    jump.click()
    expect(jump).to_be_hidden()
    assert page.evaluate(
        "() => { const m = document.getElementById('messages');"
        " return m.scrollHeight - m.scrollTop - m.clientHeight < 50; }"
    )


def test_load_earlier_keeps_the_reading_position_and_the_loaded_messages_stay_after_a_new_one(
    page, app, llm
):
    sign_up(page, app.base_url)
    history = [
        {"position": n, "role": "user" if n % 2 == 0 else "assistant", "content": f"history {n}"}
        for n in range(130)
    ]
    import_session(page, history)
    messages = page.locator("#messages [data-testid=message]")
    expect(messages).to_have_count(100)
    first = page.locator("#messages [data-position='30']")
    page.evaluate("() => { document.getElementById('messages').scrollTop = 0; }")
    place = first.evaluate("el => el.getBoundingClientRect().top")

    page.get_by_test_id("load-earlier").click()
    expect(messages).to_have_count(130)
    expect(page.get_by_test_id("load-earlier")).to_have_count(0)
    assert abs(first.evaluate("el => el.getBoundingClientRect().top") - place) <= 1

    chat(page, "a new message")
    expect(messages).to_have_count(132)
    expect(page.locator("#messages [data-position='0']")).to_have_text(re.compile("history 0"))
    expect(page.get_by_test_id("load-earlier")).to_have_count(0)


def test_times_show_in_the_readers_time_zone_with_the_date_when_not_today(contexts, app, llm):
    zone = ZoneInfo("Pacific/Kiritimati")  # UTC+14: its day is rarely UTC's
    page = contexts.new(timezone_id="Pacific/Kiritimati", locale="en-GB").new_page()
    sign_up(page, app.base_url)
    old = datetime(2021, 3, 4, 15, 7, tzinfo=UTC)
    import_session(
        page,
        [{"position": 0, "role": "user", "content": "long ago", "created_at": old.isoformat()}],
        [{"id": 1, "name": "old one", "message_count": 1, "created_at": old.isoformat()}],
    )
    # 15:07 UTC is 05:07 the next day in the reader's zone.
    old_time = page.locator("#messages [data-position='0'] time")
    expect(old_time).to_have_text(re.compile(r"5 Mar 2021.*05:07"))
    expect(page.get_by_test_id("checkpoint").locator("time")).to_have_text(
        re.compile(r"5 Mar 2021.*05:07")
    )

    chat(page, "and today")
    new_time = page.locator("#messages [data-position='1'] time")
    expect(new_time).to_have_text(re.compile(r"^\d\d:\d\d$"), timeout=TURN_TIMEOUT_MS)
    stamp = datetime.fromisoformat(new_time.get_attribute("datetime") or "")
    local = stamp.astimezone(zone)
    assert new_time.inner_text() == f"{local:%H:%M}"  # the zone's clock, not UTC's
    assert stamp.utcoffset() == timedelta(0)  # the page carries UTC; the browser converts
