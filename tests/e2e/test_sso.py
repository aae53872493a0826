"""Single sign-on in Chromium against a real OpenID Connect provider (django-oauth-toolkit's, in a
process of its own), at 1366 and 390 px, light and dark, with axe (issue 40): the login page
offers the provider; the browser goes there, signs in and comes back signed in to the chat with
an account of its own; signing out says the provider's session goes on, and where to end it."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.oidc_provider.server import Provider

from .conftest import Services, app_env, prepared
from .test_accessibility import violations
from .test_third_round import IDS, LOOKS

pytestmark = pytest.mark.e2e

CLIENT_SECRET = "e2e-client-secret-1"  # noqa: S105 - a test client's secret
PASSWORD = "provider-Passw0rd-2"  # noqa: S105 - a test user's password at the provider


@pytest.fixture(scope="module")
def provider(tmp_path_factory) -> Iterator[Provider]:
    started = Provider(tmp_path_factory.mktemp("e2e-provider")).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def sso_app(provider, model_server, tmp_path_factory) -> Iterator[Services]:
    """The app with single sign-on through the provider, its client registered there."""
    env = app_env(
        tmp_path_factory.mktemp("sso-var"),
        model_server.base_url,
        OIDC_ISSUER=provider.issuer,
        OIDC_CLIENT_ID="rollback-e2e",
        OIDC_CLIENT_SECRET=CLIENT_SECRET,
        OIDC_NAME="Test SSO",
    )
    with prepared(env, tmp_path_factory.mktemp("sso-logs")) as services:
        services.start_daphne(env)
        callback = f"{services.base_url}/accounts/sso/callback/"
        provider.add_client("rollback-e2e", CLIENT_SECRET, callback)
        yield services


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_sign_in_through_the_provider_and_out_again(contexts, provider, sso_app, width, scheme):
    person = f"sso{uuid.uuid4().hex[:8]}"
    provider.add_user(person, PASSWORD, f"{person}@example.com")
    options = {"viewport": {"width": width, "height": 844}, "color_scheme": scheme}
    page = contexts.new(**options).new_page()
    page.goto(f"{sso_app.base_url}/accounts/login/")
    button = page.get_by_test_id("sso-start")
    expect(button).to_have_text("Sign in with Test SSO")
    assert violations(page) == [], "the login page"

    button.click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(provider.base_url)}/login/"))
    page.locator("#id_username").fill(person)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("#provider-submit").click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(sso_app.base_url)}/chat/"))
    expect(page.get_by_test_id("profile-link")).to_have_text(person)
    assert violations(page) == [], "the chat, signed in"

    page.get_by_test_id("logout").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    said = page.get_by_test_id("flash")
    expect(said).to_contain_text("You are signed out of Rollback.")
    expect(said).to_contain_text("You may still be signed in at Test SSO")
    assert violations(page) == [], "the login page after signing out"
