"""Single sign-on with ACCOUNTS_PENDING and OIDC_GROUPS_CLAIM, in Chromium against a real OpenID
Connect provider (django-oauth-toolkit's, in a process of its own), with axe (issue 40 item 1): a
new person's first sign-in through the provider ends on the waiting page and opens nothing
else; an administrator approves them in the admin's Users list; their next sign-in through the
provider opens the chat, says they were approved, and their groups are the ones the provider's
claim names then (set at sign-up, changed at this sign-in, a name of no group ignored); then
they sign out. Two looks (wide and light, narrow and dark): the pages are test_sso's and
test_pending_accounts's, which go through all four."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.oidc_provider.server import Provider

from .conftest import PASSWORD, Services, app_env, served, sign_in
from .test_accessibility import violations

pytestmark = pytest.mark.e2e

CLIENT_SECRET = "e2e-client-secret-2"  # noqa: S105 - a test client's secret
PROVIDER_PASSWORD = "provider-Passw0rd-3"  # noqa: S105 - a test user's password at the provider
ADMIN = f"root{uuid.uuid4().hex[:8]}"
MARKUP = "<b>ops</b>"
GROUPS = ("analysts", "reviewers", MARKUP)
LOOKS = [(1366, "light"), (390, "dark")]


@pytest.fixture(scope="module")
def provider(tmp_path_factory) -> Iterator[Provider]:
    started = Provider(tmp_path_factory.mktemp("e2e-groups-provider")).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def groups_env(provider, model_server, tmp_path_factory) -> dict[str, str]:
    return app_env(
        tmp_path_factory.mktemp("sso-groups-var"),
        model_server.base_url,
        ACCOUNTS_PENDING="true",
        OIDC_ISSUER=provider.issuer,
        OIDC_CLIENT_ID="rollback-e2e-groups",
        OIDC_CLIENT_SECRET=CLIENT_SECRET,
        OIDC_NAME="Test SSO",
        OIDC_GROUPS_CLAIM="groups",
    )


@pytest.fixture(scope="module")
def groups_app(provider, groups_env, tmp_path_factory) -> Iterator[Services]:
    """The app, its administrator (the first account) and the groups they made; its client
    registered at the provider."""
    for services in served(groups_env, tmp_path_factory.mktemp("sso-groups-logs")):
        make = (
            "from django.contrib.auth.models import Group\n"
            "from accounts.models import User\n"
            f"User.objects.create_superuser({ADMIN!r}, password={PASSWORD!r})\n"
            f"for name in {list(GROUPS)!r}:\n"
            "    Group.objects.create(name=name)\n"
        )
        services.manage(groups_env, "shell", "-c", make)
        callback = f"{services.base_url}/accounts/sso/callback/"
        provider.add_client("rollback-e2e-groups", CLIENT_SECRET, callback)
        yield services


def groups_in_the_database(app: Services, env: dict[str, str], username: str) -> list[str]:
    code = (
        "import json\n"
        "from accounts.models import User\n"
        f"user = User.objects.get(username={username!r})\n"
        "print(json.dumps(sorted(user.groups.values_list('name', flat=True))))\n"
    )
    return json.loads(app.manage(env, "shell", "-c", code).strip().splitlines()[-1])


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=[f"{w}-{s}" for w, s in LOOKS])
def test_an_sso_sign_up_waits_for_approval_then_gets_its_groups(
    contexts, provider, groups_app, groups_env, width, scheme
):
    base = groups_app.base_url
    person = f"sso{uuid.uuid4().hex[:8]}"
    provider.add_user(person, PROVIDER_PASSWORD, f"{person}@example.com")
    provider.set_claims(person, groups=["analysts", MARKUP, "no-such-group"])
    options = {"viewport": {"width": width, "height": 844}, "color_scheme": scheme}
    page = contexts.new(**options).new_page()

    # Signing up through the provider: the whole redirect there and back, to the waiting page.
    page.goto(f"{base}/accounts/login/")
    page.get_by_test_id("sso-start").click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(provider.base_url)}/login/"))
    page.locator("#id_username").fill(person)
    page.locator("#id_password").fill(PROVIDER_PASSWORD)
    page.locator("#provider-submit").click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/accounts/sso/callback/"))
    expect(page.get_by_test_id("account-waiting")).to_have_attribute("data-state", "pending")
    expect(page.get_by_test_id("account-waiting-text")).to_contain_text(
        "Your account is waiting for an administrator's approval."
    )
    assert violations(page) == [], "the waiting page after an SSO sign-up"
    for elsewhere in ("/chat/", "/accounts/profile/"):
        page.goto(f"{base}{elsewhere}")
        expect(page).to_have_url(re.compile(r"/accounts/login/"))
    assert groups_in_the_database(groups_app, groups_env, person) == sorted(["analysts", MARKUP])

    # An administrator approves them in the admin's Users list, and sees their groups as text.
    admin = contexts.new(**options).new_page()
    sign_in(admin, base, ADMIN)
    admin.goto(f"{base}/admin/accounts/user/?approval__exact=pending")
    row = admin.locator("#result_list tbody tr", has=admin.get_by_text(person, exact=True))
    expect(row).to_contain_text("Waiting for approval")
    row.locator("input.action-select").check()
    admin.locator("select[name=action]").select_option("approve")
    with admin.expect_navigation():
        admin.locator("button[name=index]").click()
    expect(admin.locator(".messagelist")).to_contain_text("1 account approved")

    # Their next sign-in through the provider (still signed in there: straight back) opens the
    # chat, says they were approved, and sets their groups from the claim as it is now.
    provider.set_claims(person, groups=["reviewers", MARKUP])
    page.goto(f"{base}/accounts/login/")
    page.get_by_test_id("sso-start").click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/chat/"))
    expect(page.get_by_text("An administrator approved your account: welcome.")).to_be_visible()
    expect(page.get_by_test_id("profile-link")).to_have_text(person)
    assert violations(page) == [], "the chat after approval"
    assert groups_in_the_database(groups_app, groups_env, person) == sorted(["reviewers", MARKUP])
    admin.goto(f"{base}/admin/accounts/user/?q={person}")
    with admin.expect_navigation():
        admin.get_by_role("link", name=person, exact=True).click()
    chosen = admin.locator("#id_groups_to option")
    expect(chosen).to_have_text(sorted(["reviewers", MARKUP]))
    assert admin.locator("#id_groups_to b").count() == 0  # the name's markup is text

    page.get_by_test_id("logout").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    expect(page.get_by_test_id("flash")).to_contain_text("You are signed out of Rollback.")
