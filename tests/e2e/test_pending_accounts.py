"""ACCOUNTS_PENDING in Chromium, at 1366 and 390 px, light and dark, with axe (issue 40): a new
account's sign-up ends on a page saying it waits; signing in says so again; an administrator
approves it from the admin's Users list (its filter and action); the next sign-in opens the chat
and says the account was approved."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from .conftest import PASSWORD, Services, app_env, prepared, sign_in
from .test_accessibility import violations
from .test_third_round import IDS, LOOKS

pytestmark = pytest.mark.e2e

ADMIN = f"root{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def pending_env(model_server, tmp_path_factory) -> dict[str, str]:
    return app_env(
        tmp_path_factory.mktemp("pending-var"), model_server.base_url, ACCOUNTS_PENDING="true"
    )


@pytest.fixture(scope="module")
def pending_app(pending_env, tmp_path_factory) -> Iterator[Services]:
    """The app with ACCOUNTS_PENDING on, and its administrator (the first account) made."""
    with prepared(pending_env, tmp_path_factory.mktemp("pending-logs")) as services:
        make = f"User.objects.create_superuser({ADMIN!r}, password={PASSWORD!r})"
        services.manage(pending_env, "shell", "-c", f"from accounts.models import User; {make}")
        services.start_daphne(pending_env)
        yield services


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_a_new_account_waits_until_an_administrator_approves_it(
    contexts, pending_app, width, scheme
):
    base = pending_app.base_url
    options = {"viewport": {"width": width, "height": 844}, "color_scheme": scheme}
    page = contexts.new(**options).new_page()
    username = f"new{uuid.uuid4().hex[:10]}"
    page.goto(f"{base}/accounts/signup/")
    page.get_by_test_id("username").fill(username)
    page.get_by_test_id("password").fill(PASSWORD)
    page.get_by_test_id("password2").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_test_id("submit").click()
    waiting = page.get_by_test_id("account-waiting")
    expect(waiting).to_have_attribute("data-state", "pending")
    expect(page.get_by_test_id("account-waiting-text")).to_contain_text(
        "Your account is waiting for an administrator's approval."
    )
    assert violations(page) == [], "the page after sign-up"
    sign_in(page, base, username)
    expect(page.get_by_test_id("account-waiting")).to_be_visible()
    page.goto(f"{base}/chat/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))

    admin = contexts.new(**options).new_page()
    sign_in(admin, base, ADMIN)
    admin.goto(f"{base}/admin/accounts/user/?approval__exact=pending")
    row = admin.locator("#result_list tbody tr", has=admin.get_by_text(username, exact=True))
    expect(row).to_contain_text("Waiting for approval")
    assert violations(admin) == [], "the admin's waiting accounts"
    row.locator("input.action-select").check()
    admin.locator("select[name=action]").select_option("approve")
    with admin.expect_navigation():
        admin.locator("button[name=index]").click()
    expect(admin.locator(".messagelist")).to_contain_text("1 account approved")

    sign_in(page, base, username)
    expect(page).to_have_url(re.compile(r"/chat/"))
    expect(page.get_by_text("An administrator approved your account: welcome.")).to_be_visible()
    assert violations(page) == [], "the chat after approval"
