"""A real OpenID Connect provider (tests.oidc_provider, django-oauth-toolkit) for the package,
and Rollback's settings pointing at it, with its client registered for the test client's
callback (http://testserver/accounts/sso/callback/); and the steps of a sign-in through it
(`start`, `provider_answer`, `come_back`)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from urllib.parse import urljoin

import pytest
import requests
from django.contrib.auth import SESSION_KEY
from django.urls import reverse

from accounts import oidc
from accounts.models import User
from tests.oidc_provider.server import Provider

CLIENT_ID = "rollback"
CLIENT_SECRET = "client-secret-for-tests-1"  # noqa: S105 - a test client's secret
CALLBACK = "http://testserver/accounts/sso/callback/"
PASSWORD = "provider-Passw0rd-1"  # noqa: S105 - a test user's password at the provider


@pytest.fixture(scope="package")
def provider(tmp_path_factory) -> Iterator[Provider]:
    started = Provider(tmp_path_factory.mktemp("oidc-provider")).start()
    started.add_client(CLIENT_ID, CLIENT_SECRET, CALLBACK)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def sso(settings, provider) -> Provider:
    """Rollback's single sign-on on, with the provider; the discovery document read afresh."""
    settings.OIDC_ISSUER = provider.issuer
    settings.OIDC_CLIENT_ID = CLIENT_ID
    settings.OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_NAME = "Test SSO"
    settings.AUTHENTICATION_BACKENDS = [
        "accounts.backends.LimitedModelBackend",
        oidc.OIDC_BACKEND,
    ]
    oidc._discovered = None
    yield provider
    oidc._discovered = None


def provider_answer(authorize_url: str, username: str, password: str = PASSWORD) -> str:
    """Sign in at the provider as a browser would, from the authorization request Rollback made;
    the address the provider sends the browser back to (Rollback's callback, with its code)."""
    browser = requests.Session()
    page = browser.get(authorize_url, timeout=30)  # to the provider's login page
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, page.text[:500]
    signed_in = browser.post(
        page.url,
        data={
            "csrfmiddlewaretoken": token.group(1),
            "username": username,
            "password": password,
            "next": html.unescape(re.search(r'name="next" value="([^"]*)"', page.text).group(1)),
        },
        headers={"Referer": page.url},
        allow_redirects=False,
        timeout=30,
    )
    assert signed_in.status_code == 302, signed_in.text[:500]
    answer = browser.get(
        urljoin(page.url, signed_in.headers["Location"]), allow_redirects=False, timeout=30
    )
    assert answer.status_code == 302, answer.text[:500]
    return answer.headers["Location"]


def text(response) -> str:
    return html.unescape(" ".join(response.content.decode().split()))


def start(client) -> str:
    """Rollback's "Sign in with…": the provider's authorization address it sends the browser to."""
    answer = client.get(reverse("accounts:sso_start"))
    assert answer.status_code == 302, text(answer)[:500]
    return answer["Location"]


def come_back(client, callback_url: str):
    assert callback_url.startswith(CALLBACK), callback_url
    return client.get(callback_url.removeprefix("http://testserver"))


def signed_in_as(client) -> User | None:
    pk = client.session.get(SESSION_KEY)
    return User.objects.get(pk=pk) if pk else None
