"""Behind an authenticating proxy (issue 40): AUTH_PROXY_HEADER signs in the person it names,
but only on a request that comes straight from AUTH_PROXY_ADDRESSES (never from a forwarded
address); their account is made on first sight (waiting for approval with ACCOUNTS_PENDING);
a request without the header signs them out; a name that is no username signs no one in."""

from __future__ import annotations

import html

import pytest
from django.contrib.auth import SESSION_KEY

from accounts.models import User
from accounts.proxy import PROXY_BACKEND

pytestmark = pytest.mark.django_db

AUTH = "django.contrib.auth.middleware.AuthenticationMiddleware"
PROXY = {"REMOTE_ADDR": "10.0.0.5"}


@pytest.fixture
def behind_proxy(settings):
    settings.AUTH_PROXY_HEADER = "X-Forwarded-User"
    settings.AUTH_PROXY_ADDRESSES = ["10.0.0.0/24", "fd00::/8"]
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, PROXY_BACKEND]
    middleware = list(settings.MIDDLEWARE)
    middleware.insert(middleware.index(AUTH) + 1, "web.middleware.TrustedProxyUserMiddleware")
    settings.MIDDLEWARE = middleware


def signed_in(client) -> str | None:
    pk = client.session.get(SESSION_KEY)
    return User.objects.get(pk=pk).username if pk else None


def test_the_proxys_header_signs_in_switches_and_signs_out(client, behind_proxy, admin_user):
    answer = client.get("/chat/", HTTP_X_FORWARDED_USER="ada", **PROXY)
    assert answer.status_code == 200
    ada = User.objects.get(username="ada")
    assert (ada.approval, ada.is_active, ada.has_usable_password()) == ("approved", True, False)
    assert signed_in(client) == "ada"
    assert client.get("/chat/", HTTP_X_FORWARDED_USER="ada", **PROXY).status_code == 200
    client.get("/chat/", HTTP_X_FORWARDED_USER="bea", **PROXY)
    assert signed_in(client) == "bea"
    gone = client.get("/chat/", **PROXY)
    assert gone.status_code == 302
    assert signed_in(client) is None


def test_the_header_from_any_other_address_means_nothing(client, behind_proxy):
    for meta in (
        {"REMOTE_ADDR": "10.0.1.5"},
        {"REMOTE_ADDR": "203.0.113.9", "HTTP_X_FORWARDED_FOR": "10.0.0.5"},
    ):
        answer = client.get("/chat/", HTTP_X_FORWARDED_USER="ada", **meta)
        assert answer.status_code == 302
        assert answer["Location"].startswith("/accounts/login/")
    assert not User.objects.filter(username="ada").exists()
    # Nor does it sign out someone who signed in with a password.
    User.objects.create_user("cyd", password="cyd-password-1")  # noqa: S106 - a test password
    client.post("/accounts/login/", {"username": "cyd", "password": "cyd-password-1"})
    assert client.get("/chat/", REMOTE_ADDR="198.51.100.7").status_code == 200


def test_a_waiting_account_and_a_bad_name_are_told_and_not_signed_in(
    client, behind_proxy, settings, admin_user
):
    settings.ACCOUNTS_PENDING = True
    waiting = client.get("/chat/", HTTP_X_FORWARDED_USER="newcomer", **PROXY)
    assert waiting.status_code == 403
    said = html.unescape(waiting.content.decode())
    assert "Your account is waiting for an administrator's approval." in said
    assert signed_in(client) is None
    bad = client.get("/chat/", HTTP_X_FORWARDED_USER="<b>x</b>", **PROXY)
    assert bad.status_code == 403
    assert "named no account that can sign in here" in bad.content.decode()
    assert "<b>x</b>" not in bad.content.decode()
    assert signed_in(client) is None
