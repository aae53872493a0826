"""LOCAL_LOGIN off (issue 40): password sign-in is for the first administrator alone (the login
page and the admin's); everyone else is told, once their password is right, that it is turned
off; sign-up with a password is closed, but for a fresh install's first account."""

from __future__ import annotations

import html

import pytest
from django.contrib.auth import SESSION_KEY
from django.urls import reverse

from accounts.errors import SignupClosed
from accounts.models import User
from accounts.services import apikey_create, user_signup

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery-9"  # noqa: S105 - a test user's password
OFF = "Signing in with a password is turned off on this server, but for its first administrator."


@pytest.fixture
def passwords_off(settings):
    settings.LOCAL_LOGIN = False


def text(response) -> str:
    return html.unescape(" ".join(response.content.decode().split()))


def sign_in(client, username: str, password: str = PASSWORD):
    return client.post(reverse("accounts:login"), {"username": username, "password": password})


def test_only_the_first_administrator_signs_in_with_a_password(client, passwords_off):
    root = user_signup(username="root", password=PASSWORD)  # a fresh install's first account
    assert root.is_superuser
    later_admin = User.objects.create_superuser("second", password=PASSWORD)
    ada = User.objects.create_user("ada", password=PASSWORD)

    page = client.get(reverse("accounts:login"))
    assert 'data-testid="passwords-off"' in page.content.decode()
    for user in (later_admin, ada):
        answer = sign_in(client, user.username)
        assert answer.status_code == 200
        assert OFF in text(answer)
        assert SESSION_KEY not in client.session
        wrong = sign_in(client, user.username, "not-the-password-1")
        assert OFF not in text(wrong)  # a wrong password says nothing more
    admin = client.post(reverse("admin:login"), {"username": "ada", "password": PASSWORD})
    assert OFF in text(admin)
    assert sign_in(client, "root").status_code == 302
    assert client.session[SESSION_KEY] == str(root.pk)


def test_sign_up_is_closed_and_api_keys_still_work(client, passwords_off):
    user_signup(username="root", password=PASSWORD)
    with pytest.raises(SignupClosed, match="Signing up with a password is turned off"):
        user_signup(username="ada", password=PASSWORD)
    page = client.get(reverse("accounts:signup"))
    assert "Signing up with a password is turned off on this server." in text(page)
    ada = User.objects.create_user("ada", password=PASSWORD)
    _, secret = apikey_create(user=ada, name="integration")
    api = client.get("/api/v1/sessions/", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.status_code == 200


def test_on_by_default_everyone_signs_in(client):
    User.objects.create_superuser("root", password=PASSWORD)
    User.objects.create_user("ada", password=PASSWORD)
    assert sign_in(client, "ada").status_code == 302
