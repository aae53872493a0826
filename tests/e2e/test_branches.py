"""Branches in a real browser: the "< 1/2 >" switcher between a message and its edit, and
naming a branch in place from the tree."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import FINISHED_ASSISTANT, chat, current_branch_id, new_session, sign_up
from .test_accessibility import violations

pytestmark = pytest.mark.e2e


def test_the_version_switcher_moves_between_an_original_and_its_edit(page, app, llm):
    sign_up(page, app.base_url)
    new_session(page)
    llm.queue(Reply("first answer"))
    chat(page, "original question")
    main = current_branch_id(page)
    user = page.locator("#messages [data-testid=message][data-role=user]")
    reply = page.locator(f"{FINISHED_ASSISTANT} .body")
    expect(user.get_by_test_id("versions")).to_have_count(0)  # one version: no switcher

    user.first.hover()
    page.get_by_test_id("edit-message").first.click()
    page.get_by_test_id("edit-input").fill("edited question")
    llm.queue(Reply("answer to the edit"))
    page.get_by_test_id("edit-send").click()
    expect(reply.last).to_have_text("answer to the edit")
    expect(page.get_by_test_id("current-branch")).not_to_have_attribute("data-branch-id", main)
    edit = current_branch_id(page)

    # On the edit: 2/2, visible without hovering, only "<" leads anywhere.
    expect(user).to_have_count(1)
    expect(user.locator(".body")).to_have_text("edited question")
    switcher = user.get_by_test_id("versions")
    expect(switcher).to_be_visible()
    expect(switcher.get_by_test_id("version-index")).to_have_text("2/2")
    expect(switcher.get_by_test_id("version-next")).to_be_disabled()
    expect(page.get_by_test_id("current-branch")).to_contain_text("edit of message 1")

    # "<": the original with its reply, 1/2.
    switcher.get_by_test_id("version-previous").click()
    expect(switcher.get_by_test_id("version-index")).to_have_text("1/2")
    expect(user.locator(".body")).to_have_text("original question")
    expect(reply).to_have_count(1)
    expect(reply.last).to_have_text("first answer")
    expect(page.get_by_test_id("current-branch")).to_have_attribute("data-branch-id", main)
    expect(page.get_by_test_id("current-branch")).to_contain_text("main")
    expect(switcher.get_by_test_id("version-previous")).to_be_disabled()

    # ">": back to the edit.
    switcher.get_by_test_id("version-next").click()
    expect(switcher.get_by_test_id("version-index")).to_have_text("2/2")
    expect(user.locator(".body")).to_have_text("edited question")
    expect(reply.last).to_have_text("answer to the edit")
    expect(page.get_by_test_id("current-branch")).to_have_attribute("data-branch-id", edit)


def test_a_branch_is_named_in_place_from_the_tree(page, app, llm):
    sign_up(page, app.base_url)
    new_session(page)
    llm.queue(Reply("hello back"))
    chat(page, "hello")
    node = page.locator("#branch-tree > li").first
    # Reachable from the keyboard: focus "Rename" and open it with Enter.
    node.get_by_test_id("branch-rename").focus()
    page.keyboard.press("Enter")
    field = node.get_by_test_id("branch-name-input")
    expect(field).to_be_visible()

    field.fill("   ")  # only spaces: the server says why, in place, keeping what was typed
    field.press("Enter")
    error = node.get_by_test_id("branch-rename-error")
    expect(error).to_contain_text("cannot be empty")
    expect(node.get_by_test_id("branch-name-input")).to_have_value("   ")
    expect(page.get_by_test_id("current-branch")).to_contain_text("main")

    node.get_by_test_id("branch-name-input").fill("the plan")
    node.get_by_test_id("branch-name-input").press("Enter")
    expect(page.get_by_test_id("current-branch")).to_contain_text("the plan")
    expect(node.get_by_test_id("branch-label")).to_have_text("the plan")
    expect(node.get_by_test_id("branch-rename-error")).to_have_count(0)


LOOKS = [(1366, "light"), (1366, "dark"), (390, "light"), (390, "dark")]


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=[f"{w}-{s}" for w, s in LOOKS])
def test_an_edits_versions_sit_on_the_question_and_a_regenerations_on_the_reply(
    contexts, app, llm, width, scheme
):
    page = contexts.new(viewport={"width": width, "height": 844}).new_page()
    page.emulate_media(color_scheme=scheme)
    sign_up(page, app.base_url)
    if width < 700:
        page.get_by_test_id("toggle-sidebar").click()  # the sessions drawer
    new_session(page)
    llm.queue(Reply("first answer"))
    chat(page, "original question")
    user = page.locator("#messages [data-testid=message][data-role=user]")
    assistant = page.locator(FINISHED_ASSISTANT)

    user.first.hover()
    page.get_by_test_id("edit-message").first.click()
    page.get_by_test_id("edit-input").fill("edited question")
    llm.queue(Reply("answer to the edit"))
    page.get_by_test_id("edit-send").click()
    expect(assistant.locator(".body").last).to_have_text("answer to the edit")

    assistant.last.hover()
    llm.queue(Reply("another answer to the edit"))
    assistant.last.get_by_test_id("regenerate").click()
    expect(assistant.locator(".body").last).to_have_text("another answer to the edit")

    # The question: its two edits; the reply: the edit's two answers (not "3/3" on the question).
    question = user.first.get_by_test_id("versions")
    expect(question.get_by_test_id("version-index")).to_have_text("2/2")
    answer = assistant.last.get_by_test_id("versions")
    expect(answer.get_by_test_id("version-index")).to_have_text("2/2")
    answer.get_by_test_id("version-previous").click()
    expect(assistant.locator(".body").last).to_have_text("answer to the edit")
    expect(user.first.locator(".body")).to_have_text("edited question")
    expect(question.get_by_test_id("version-index")).to_have_text("2/2")
    question.get_by_test_id("version-previous").click()
    expect(user.first.locator(".body")).to_have_text("original question")
    expect(assistant.locator(".body").last).to_have_text("first answer")
    assert violations(page) == []
