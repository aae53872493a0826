"""Checkpoint markers in Chromium (issue 26, item 2), at 1366 and 390 pixels wide, light and
dark: a marker where each checkpoint sits, named (cut short, whole in its tooltip), kind and time;
the panel's "Show in conversation" scrolls to a loaded marker and focuses it, or opens the history
around one far back, or offers to switch to another branch; markers come and go live in another
tab without touching what it reads or types; axe finds nothing serious."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

from .conftest import new_session, send_message, sign_up, wait_turn_done, wait_ws_open
from .test_accessibility import violations

pytestmark = pytest.mark.e2e

HISTORY = 600
LONG_NAME = "the plan before we rewrote the parser and the whole of its error recovery, again"
SEED = (
    "from sessions_app.models import Branch, Message; "
    "from checkpoints.services import checkpoint_create; "
    "from sessions_app.services import branch_fork; "
    "b = Branch.objects.get(session_id={sid}); "
    "Message.objects.bulk_create([Message(branch=b, position=i, "
    "role='user' if i % 2 == 0 else 'assistant', content=f'message {{i}}') "
    "for i in range({n})]); "
    "Branch.objects.filter(pk=b.pk).update(message_count={n}); "
    "b.refresh_from_db(); "
    "checkpoint_create(branch=b, name='far back', at=20); "
    "checkpoint_create(branch=b, name={long!r}, at={n} - 10); "
    "side = branch_fork(branch=b, position=5, make_current=False); "
    "Message.objects.create(branch=side, position=5, role='user', content='aside'); "
    "Branch.objects.filter(pk=side.pk).update(message_count=6); "
    "side.refresh_from_db(); "
    "checkpoint_create(branch=side, name='on the side')"
)
# The element is in the conversation's visible part.
IN_VIEW = """(selector) => {
    const el = document.querySelector(selector);
    if (!el) return false;
    const box = document.getElementById("messages").getBoundingClientRect();
    const at = el.getBoundingClientRect();
    return at.top >= box.top - 1 && at.bottom <= box.bottom + 1;
}"""


def _marker(page, name: str):
    return page.get_by_role("group", name=f"Checkpoint “{name}”")


def _panel_item(page, name: str):
    return page.get_by_test_id("checkpoint").filter(
        has=page.locator(".name", has_text=re.compile(rf"^{re.escape(name)}$"))
    )


def _open_panel_if_narrow(page, width: int) -> None:
    if width < 1000:
        page.get_by_test_id("toggle-panel").click()
        expect(page.locator("#side-panel")).to_be_visible()


def _shown_and_focused(page, name: str) -> None:
    marker = _marker(page, name)
    expect(marker).to_be_focused()
    marker_id = marker.get_attribute("id")
    page.wait_for_function(IN_VIEW, arg=f"#{marker_id}")


@pytest.mark.parametrize(("width", "height"), [(1366, 800), (390, 844)])
def test_markers_show_where_checkpoints_sit_and_the_panel_takes_you_there(
    page, app, app_settings, width, height
):
    sign_up(page, app.base_url, prefix="markers")
    sid = new_session(page)
    app.manage(app_settings, "shell", "-c", SEED.format(sid=sid, n=HISTORY, long=LONG_NAME))
    page.set_viewport_size({"width": width, "height": height})
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.goto(f"{app.base_url}/chat/{sid}/")
        wait_ws_open(page)

        # The latest page: the marker after message 589, its long name cut short, whole in
        # its tooltip; the kind and the time are words, not colours.
        marker = _marker(page, LONG_NAME)
        expect(marker).to_be_visible()
        expect(marker).to_contain_text("manual")
        expect(marker.locator("time")).to_have_attribute("datetime", re.compile(r"^\d{4}-"))
        expect(marker.get_by_test_id("checkpoint-marker-name")).to_have_attribute(
            "title", LONG_NAME
        )
        assert marker.locator(".marker-label").evaluate("e => e.scrollWidth > e.clientWidth")
        after = page.locator("#messages [data-testid=message]").filter(has_text="message 589")
        assert after.evaluate("m => m.nextElementSibling.id") == marker.get_attribute("id")
        expect(_marker(page, "far back")).to_have_count(0)  # not loaded
        expect(_marker(page, "on the side")).to_have_count(0)  # another branch's
        assert violations(page) == [], scheme

        # A marker already loaded: scrolled to, focused, the drawer closed on a phone.
        page.locator("#messages").evaluate("m => { m.scrollTop = 0; }")
        _open_panel_if_narrow(page, width)
        _panel_item(page, LONG_NAME).get_by_test_id("show-checkpoint").click()
        _shown_and_focused(page, LONG_NAME)
        expect(page.locator("#side-panel")).to_be_visible(visible=width >= 1000)

        # One far back: the history around it, with "Load later".
        _open_panel_if_narrow(page, width)
        with page.expect_navigation():
            _panel_item(page, "far back").get_by_test_id("show-checkpoint").click()
        assert page.url.endswith(
            "?checkpoint=" + _marker(page, "far back").get_attribute("data-checkpoint-id")
        )
        _shown_and_focused(page, "far back")
        expect(page.get_by_test_id("load-later")).to_be_visible()
        previous = page.locator("#messages [data-testid=message]").filter(has_text="message 19")
        assert previous.evaluate("m => m.nextElementSibling.getAttribute('aria-labelledby')")
        assert violations(page) == [], scheme

    # One on another branch: that branch opens read-only at its marker; "Continue here" makes
    # it the current branch.
    _open_panel_if_narrow(page, width)
    with page.expect_navigation():
        _panel_item(page, "on the side").get_by_test_id("show-checkpoint").click()
    expect(page.get_by_test_id("read-banner")).to_contain_text("You are reading the branch")
    _shown_and_focused(page, "on the side")
    assert violations(page) == []
    with page.expect_navigation():
        page.get_by_test_id("continue-here").click()
    _shown_and_focused(page, "on the side")
    expect(page.locator("#messages [data-testid=message]").last).to_contain_text("aside")


def test_markers_come_and_go_live_in_another_tab_without_moving_its_reader(
    page, app, app_settings, llm
):
    page.set_viewport_size({"width": 1366, "height": 800})
    sign_up(page, app.base_url, prefix="markerslive")
    sid = new_session(page)
    app.manage(app_settings, "shell", "-c", SEED.format(sid=sid, n=HISTORY, long=LONG_NAME))
    page.goto(f"{app.base_url}/chat/{sid}/")
    wait_ws_open(page)
    reader = page.context.new_page()
    reader.set_viewport_size({"width": 1366, "height": 800})
    messages = reader.locator("#messages")

    # A reader on the history around a checkpoint far back stays there when a checkpoint is
    # saved elsewhere (its panel shows it: the live update came).
    reader.goto(f"{app.base_url}/chat/{sid}/")
    wait_ws_open(reader)
    with reader.expect_navigation():
        _panel_item(reader, "far back").get_by_test_id("show-checkpoint").click()
    wait_ws_open(reader)
    _shown_and_focused(reader, "far back")
    page.get_by_test_id("checkpoint-name").fill("saved meanwhile")
    page.get_by_test_id("save-checkpoint").click()
    expect(_panel_item(reader, "saved meanwhile")).to_have_count(1)
    expect(_marker(page, "saved meanwhile")).to_have_count(1)
    expect(reader.get_by_test_id("load-later")).to_be_visible()
    expect(_marker(reader, "far back")).to_be_in_viewport()
    expect(messages.get_by_text("message 599", exact=True)).to_have_count(0)

    # The reader on the latest page loads earlier messages down to the far-back marker, and
    # types a draft.
    reader.goto(f"{app.base_url}/chat/{sid}/")
    wait_ws_open(reader)
    for shown in ("message 500", "message 400", "message 300", "message 200", "message 100"):
        expect(messages.get_by_text(shown, exact=True)).to_have_count(1)
        reader.get_by_test_id("load-earlier").click()
    expect(messages.get_by_text("message 20", exact=True)).to_have_count(1)
    far = _marker(reader, "far back")
    expect(far).to_have_count(1)
    box = reader.get_by_test_id("message-input")
    box.fill("a draft that stays")

    # A checkpoint saved in the other tab comes at the end of the reader's history...
    page.get_by_test_id("checkpoint-name").fill("saved elsewhere")
    page.get_by_test_id("save-checkpoint").click()
    expect(_marker(reader, "saved elsewhere")).to_have_count(1)
    assert reader.locator("#messages > *").last.get_attribute("id") == _marker(
        reader, "saved elsewhere"
    ).get_attribute("id")
    expect(box).to_have_value("a draft that stays")
    expect(messages.get_by_text("message 20", exact=True)).to_have_count(1)

    # ...and the far-back one, deleted there, goes from the messages loaded earlier here,
    # without moving the messages the reader reads.
    reading = messages.get_by_text("message 40", exact=True)
    reading.scroll_into_view_if_needed()
    expect(far).not_to_be_in_viewport()
    top = reading.evaluate("m => m.getBoundingClientRect().top")
    page.once("dialog", lambda dialog: dialog.accept())
    _panel_item(page, "far back").get_by_test_id("delete-checkpoint").click()
    expect(_marker(reader, "far back")).to_have_count(0)
    expect(_marker(page, "far back")).to_have_count(0)
    expect(_marker(reader, "saved elsewhere")).to_have_count(1)
    expect(messages.get_by_text("message 20", exact=True)).to_have_count(1)
    assert abs(reading.evaluate("m => m.getBoundingClientRect().top") - top) < 2
    expect(box).to_have_value("a draft that stays")

    # The agent's checkpoint (its tool) and the automatic one after its write come too.
    llm.queue(
        ToolCalls(
            [
                ToolCall("create_checkpoint", {"name": "by the agent"}),
                ToolCall("write_file", {"path": "answer.md", "content": "42"}),
            ]
        ),
        Reply("It is 42."),
    )
    wait_turn_done(page, send_message(page, "write 6*7 to answer.md"))
    expect(_marker(reader, "by the agent")).to_have_count(1)
    auto = reader.get_by_test_id("checkpoint-marker").filter(has_text="auto")
    expect(auto).to_have_count(1)
    expect(reader.locator("#messages > *").last).to_have_attribute(
        "id", re.compile("^checkpoint-marker-")
    )
    expect(box).to_have_value("a draft that stays")
