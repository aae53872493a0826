"""Pages besides the chat in a real browser, under the Content Security Policy: the profile's API
keys, the console (Django's admin) and the API docs. The `contexts` fixture fails a test whose
pages had anything blocked by the policy."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import chat, new_session, sign_in_as_staff, sign_up

pytestmark = pytest.mark.e2e


def test_revoking_an_api_key_asks_first(page, app):
    sign_up(page, app.base_url)
    page.get_by_test_id("profile-link").click()
    page.get_by_test_id("api-key-name").fill("laptop")
    page.get_by_test_id("create-api-key").click()
    expect(page.get_by_test_id("new-api-key")).to_have_text(re.compile(r"\S{20,}"))
    row = page.get_by_test_id("api-key-row").filter(has_text="laptop")

    questions = []

    def answer(dialog, accept: bool) -> None:
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, accept=False))
    row.get_by_test_id("revoke-api-key").click()
    expect(row).to_contain_text("active")
    page.once("dialog", lambda dialog: answer(dialog, accept=True))
    with page.expect_navigation():
        row.get_by_test_id("revoke-api-key").click()
    expect(page.get_by_test_id("flash")).to_contain_text("API key “laptop” is revoked")
    expect(row).to_contain_text("revoked")
    assert questions == ["Revoke the key “laptop”? Programs using it will be refused."] * 2


def test_the_console_works_under_the_policy(page, app, app_settings, llm):
    sign_in_as_staff(page, app, app_settings)
    new_session(page)
    chat(page, "a line\nand another")
    branch_id = page.get_by_test_id("current-branch").get_attribute("data-branch-id")

    page.goto(f"{app.base_url}/admin/sessions_app/branch/{branch_id}/change/")
    cell = page.locator("td.message-content").first
    expect(cell).to_have_text(re.compile(r"a line\s+and another"))
    assert cell.evaluate("td => getComputedStyle(td).whiteSpace") == "pre-wrap"
    page.goto(f"{app.base_url}/admin/sessions_app/session/")
    expect(page.locator("#result_list")).to_be_visible()


def test_the_api_docs_render_under_the_policy(page, app):
    page.goto(f"{app.base_url}/api/v1/docs/")
    expect(page.locator(".swagger-ui .title")).to_contain_text("Rollback API")
    expect(page.locator(".opblock").first).to_be_visible()


def test_a_new_api_key_is_shown_once_with_a_copy_button(page, app):
    sign_up(page, app.base_url)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_test_id("profile-link").click()
    page.get_by_test_id("api-key-name").fill("laptop")
    page.get_by_test_id("create-api-key").click()
    page.wait_for_url(re.compile(r"/accounts/profile/#api-keys$"))
    secret = page.get_by_test_id("new-api-key").inner_text().strip()
    assert len(secret) >= 20
    copy = page.get_by_role("button", name="Copy the new API key")
    copy.focus()
    page.keyboard.press("Enter")
    expect(page.locator("[data-copy-status]")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == secret
    # A refresh lands on the GET: no second key, and the secret is not shown again.
    page.reload()
    expect(page.get_by_test_id("api-key-row")).to_have_count(1)
    expect(page.get_by_test_id("new-api-key")).to_have_count(0)
