from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.errors import SignupClosed
from accounts.models import ApiKey, SiteSettings
from accounts.services import apikey_authenticate, apikey_create, user_signup

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_(client, admin_user):
    client.force_login(admin_user)
    return client


def test_site_settings_page_loads_for_the_admin(admin_client_):
    SiteSettings.load()
    assert admin_client_.get(reverse("admin:accounts_sitesettings_changelist")).status_code == 200
    page = admin_client_.get(reverse("admin:accounts_sitesettings_change", args=[1]))
    assert page.status_code == 200
    assert "sign-up open" in page.content.decode().lower()


def test_turning_signup_off_in_the_admin_closes_signup(admin_client_):
    SiteSettings.load()
    url = reverse("admin:accounts_sitesettings_change", args=[1])

    response = admin_client_.post(url, {"_save": "Save"})  # the checkbox left unticked

    assert response.status_code == 302
    assert SiteSettings.load().signup_open is False
    with pytest.raises(SignupClosed):
        user_signup(username="carol", password="correct-horse-battery-9")  # noqa: S106 - a test user's password
    page = admin_client_.get(reverse("accounts:signup"))  # logged in: goes to the chat
    assert page.status_code == 302


def test_site_settings_cannot_be_added_twice_nor_deleted(admin_client_):
    SiteSettings.load()
    assert admin_client_.get(reverse("admin:accounts_sitesettings_add")).status_code == 403
    delete = reverse("admin:accounts_sitesettings_delete", args=[1])
    assert admin_client_.post(delete, {"post": "yes"}).status_code == 403
    assert SiteSettings.objects.filter(pk=1).exists()


def test_site_settings_are_not_for_other_users(client, alice):
    client.force_login(alice)
    response = client.get(reverse("admin:accounts_sitesettings_changelist"))
    assert response.status_code == 302
    assert "/admin/login/" in response.url


def test_the_admin_lists_api_keys_without_secrets_and_can_revoke_them(admin_client_, alice):
    key, secret = apikey_create(user=alice, name="laptop")

    listing = admin_client_.get(reverse("admin:accounts_apikey_changelist"))
    assert listing.status_code == 200
    assert key.prefix in listing.content.decode()
    assert secret not in listing.content.decode()
    detail = admin_client_.get(reverse("admin:accounts_apikey_change", args=[key.pk]))
    assert detail.status_code == 200
    assert secret not in detail.content.decode()

    admin_client_.post(
        reverse("admin:accounts_apikey_changelist"),
        {"action": "revoke", "_selected_action": [key.pk]},
    )
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    assert apikey_authenticate(secret) is None


def test_the_user_admin_still_lists_users(admin_client_, alice):
    response = admin_client_.get(reverse("admin:accounts_user_changelist"))
    assert response.status_code == 200
    assert "alice" in response.content.decode()


def test_the_admin_login_is_limited_like_the_login_page(client, admin_user, settings):
    settings.ROLLBACK_LOGIN_FAILURES_LIMIT = 5
    url = reverse("admin:login")

    def log_in(password: str):
        return client.post(url, {"username": "admin", "password": password})

    for n in range(4):
        assert log_in(f"guess-{n}").status_code == 200
    assert log_in("admin-password-1").status_code == 302  # clears the failures
    assert client.get(reverse("admin:index")).status_code == 200
    client.post(reverse("admin:logout"))
    for n in range(5):
        assert log_in(f"guess-{n}").status_code == 200

    refused = log_in("admin-password-1")

    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert "Too many failed sign-in attempts; try again in 15 minutes." in refused.content.decode()
    assert client.get(reverse("admin:index")).status_code == 302  # still sent to log in
