"""The sidebar's sessions in a real browser, under the Content Security Policy: the automatic
title arriving live, renaming in place (Esc keeps the name, Enter saves it, a refused name says
why), archiving and unarchiving, and deleting another session without leaving the page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import chat, new_session, save_checkpoint, sign_up

pytestmark = pytest.mark.e2e


def entry(page, session_id: int):
    return page.locator(f"#session-{session_id}")


def test_the_first_exchange_titles_the_session_live(page, app, llm):
    sign_up(page, app.base_url)
    sid = new_session(page)
    expect(page.get_by_test_id("session-title")).to_have_text("New session")
    chat(page, "hello")
    # The model server's side answer to titling requests (tests/conftest.answer_titles).
    expect(page.get_by_test_id("session-title")).to_have_text("Fake title")
    expect(entry(page, sid).get_by_test_id("session-link")).to_have_text("Fake title")


def test_rename_in_place_and_archive(page, app, llm):
    sign_up(page, app.base_url)
    first = new_session(page)
    save_checkpoint(page, "start")  # no longer blank: "New session" makes another
    second = new_session(page)  # its page is the one open
    # Rename the first in place: the field holds the current name; Esc keeps it.
    entry(page, first).get_by_test_id("rename-session").click()
    field = entry(page, first).get_by_test_id("rename-input")
    expect(field).to_be_focused()
    expect(field).to_have_value("New session")
    field.press("Escape")
    expect(entry(page, first).get_by_test_id("session-link")).to_have_text("New session")
    # A refused name says why, in place; what was typed stays.
    entry(page, first).get_by_test_id("rename-session").click()
    field = entry(page, first).get_by_test_id("rename-input")
    field.fill("n" * 201)
    field.press("Enter")
    expect(entry(page, first).get_by_test_id("rename-error")).to_contain_text("limit is 200")
    expect(entry(page, first).get_by_test_id("rename-input")).to_have_value("n" * 201)
    # Enter saves.
    field = entry(page, first).get_by_test_id("rename-input")
    field.fill("Holiday plans")
    field.press("Enter")
    expect(entry(page, first).get_by_test_id("session-link")).to_have_text("Holiday plans")
    expect(page.get_by_test_id("session-title")).to_have_text("New session")  # still the second

    # Archive it with the keyboard: the button is there without hovering.
    archive = entry(page, first).get_by_test_id("archive-session")
    archive.focus()
    archive.press("Enter")
    expect(entry(page, first)).to_have_count(0)
    page.get_by_test_id("show-archived").click()
    expect(entry(page, first).get_by_test_id("session-link")).to_have_text("Holiday plans")
    expect(entry(page, second)).to_have_count(0)
    entry(page, first).get_by_test_id("unarchive-session").click()
    expect(page.get_by_test_id("no-sessions")).to_have_text("No archived sessions.")
    page.get_by_test_id("show-active").click()
    expect(entry(page, first)).to_have_count(1)
    expect(entry(page, second)).to_have_count(1)

    # Deleting the other session only takes it off the list: the page stays where it was.
    url = page.url
    page.once("dialog", lambda dialog: dialog.accept())
    entry(page, first).get_by_test_id("delete-session").click()
    expect(entry(page, first)).to_have_count(0)
    assert page.url == url
    expect(page.get_by_test_id("session-title")).to_have_text("New session")
