from __future__ import annotations

import threading

import pytest
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.hashers import MD5PasswordHasher, make_password
from django.db import connection
from django.test import Client
from django.urls import reverse

from accounts.models import ApiKey, SiteSettings, User
from accounts.services import API_KEYS_ACTIVE_MAX, apikey_authenticate, apikey_create, apikey_revoke

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery-9"  # noqa: S105 - a test user's password
SIGNUP_CLOSED = "Sign-up is closed on this server; ask an administrator for an account."


def signup_data(username: str = "ada", **extra) -> dict:
    return {"username": username, "password": PASSWORD, "password2": PASSWORD, **extra}


def close_signup() -> None:
    SiteSettings.objects.update_or_create(pk=1, defaults={"signup_open": False})


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


def logged_in_user_id(client) -> str | None:
    return client.session.get(SESSION_KEY)


# --- Sign-up ----------------------------------------------------------------------------------


def test_signup_page_shows_the_form(client):
    response = client.get(reverse("accounts:signup"))
    assert response.status_code == 200
    html = response.content.decode()
    for testid in ("username", "password", "password2", "submit"):
        assert f'data-testid="{testid}"' in html


def test_first_signup_makes_the_admin_logs_in_and_goes_to_the_chat(client):
    response = client.post(reverse("accounts:signup"), signup_data("ada"))

    assert response.status_code == 302
    assert response.url == reverse("chat:home")
    ada = User.objects.get(username="ada")
    assert ada.is_superuser
    assert ada.is_staff
    assert logged_in_user_id(client) == str(ada.pk)


def test_second_signup_is_not_an_admin(client, alice):
    response = client.post(reverse("accounts:signup"), signup_data("carol"))
    assert response.status_code == 302
    carol = User.objects.get(username="carol")
    assert not carol.is_superuser
    assert not carol.is_staff


def test_closed_signup_shows_no_form_and_refuses_a_post(client, alice):
    close_signup()

    page = client.get(reverse("accounts:signup"))
    assert page.status_code == 200
    assert SIGNUP_CLOSED in page.content.decode()
    assert 'data-testid="password2"' not in page.content.decode()

    refused = client.post(reverse("accounts:signup"), signup_data("carol"))
    assert refused.status_code == 403
    assert SIGNUP_CLOSED in refused.content.decode()
    assert not User.objects.filter(username="carol").exists()
    assert logged_in_user_id(client) is None


def test_closed_signup_still_takes_the_first_account(client):
    close_signup()
    assert 'data-testid="password2"' in client.get(reverse("accounts:signup")).content.decode()
    response = client.post(reverse("accounts:signup"), signup_data("ada"))
    assert response.status_code == 302
    assert User.objects.get(username="ada").is_superuser


def test_weak_password_shows_the_validators_messages_and_creates_nothing(client):
    data = signup_data("ada", password="123", password2="123")  # noqa: S106 - a test user's password
    response = client.post(reverse("accounts:signup"), data)

    assert response.status_code == 400
    html = response.content.decode()
    assert "This password is too short" in html
    assert 'class="errorlist' in html
    assert not User.objects.exists()


def test_different_passwords_are_refused(client):
    response = client.post(reverse("accounts:signup"), signup_data(password2="something-else-7"))
    assert response.status_code == 400
    assert "The two passwords differ." in response.content.decode()
    assert not User.objects.exists()


def test_username_taken_in_another_case_is_refused(client, alice):
    response = client.post(reverse("accounts:signup"), signup_data("Alice"))
    assert response.status_code == 400
    assert "A user with that username already exists." in response.content.decode()
    assert User.objects.count() == 1


def test_a_lookalike_username_is_refused_on_the_form(client, alice):
    response = client.post(
        reverse("accounts:signup"), signup_data("\u0430lice")
    )  # Cyrillic "\u0430"
    assert response.status_code == 400
    assert "Use letters of one script in a username" in response.content.decode()

    client.post(reverse("accounts:signup"), signup_data("bob"))
    client.post(reverse("accounts:logout"))
    response = client.post(reverse("accounts:signup"), signup_data("b0b"))
    assert response.status_code == 400
    assert "That username looks like an existing one; choose another." in (
        response.content.decode()
    )
    assert sorted(User.objects.values_list("username", flat=True)) == ["alice", "bob"]


def test_signups_from_one_address_are_limited(alice, settings):
    settings.ROLLBACK_SIGNUPS_PER_HOUR_PER_IP = 2
    for name in ("ada", "grace"):
        new_user = Client()
        assert new_user.post(reverse("accounts:signup"), signup_data(name)).status_code == 302
        assert new_user.get(reverse("accounts:profile")).status_code == 200  # signed in

    refused = Client().post(reverse("accounts:signup"), signup_data("hedy"))

    assert refused.status_code == 429
    assert 59 * 60 < int(refused["Retry-After"]) <= 60 * 60
    html = refused.content.decode()
    assert "Too many sign-ups from your network; try again in 60 minutes." in html
    assert 'data-testid="password2"' in html
    assert not User.objects.filter(username="hedy").exists()
    other = Client(REMOTE_ADDR="203.0.113.9").post(reverse("accounts:signup"), signup_data("hedy"))
    assert other.status_code == 302


def test_signup_redirects_a_logged_in_user_to_the_chat(alice_client):
    response = alice_client.get(reverse("accounts:signup"))
    assert response.status_code == 302
    assert response.url == reverse("chat:home")


# --- Log in, log out, password ----------------------------------------------------------------


def test_login_page_has_its_test_ids(client):
    html = client.get(reverse("accounts:login")).content.decode()
    for testid in ("username", "password", "submit"):
        assert f'data-testid="{testid}"' in html


def test_login_with_the_right_password_goes_to_the_chat(client, alice):
    response = client.post(
        reverse("accounts:login"), {"username": "alice", "password": "alice-password-1"}
    )
    assert response.status_code == 302
    assert response.url == reverse("chat:home")
    assert logged_in_user_id(client) == str(alice.pk)


def test_login_with_a_wrong_password_says_so(client, alice):
    response = client.post(reverse("accounts:login"), {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()
    assert logged_in_user_id(client) is None


# --- Sign-in limits ---------------------------------------------------------------------------

LOCKED = "Too many failed sign-in attempts; try again in 15 minutes."


class CountingHasher(MD5PasswordHasher):
    """The suite's MD5 hasher, counting the passwords it checks."""

    checked = 0
    _lock = threading.Lock()

    def verify(self, password: str, encoded: str) -> bool:
        with CountingHasher._lock:
            CountingHasher.checked += 1
        return super().verify(password, encoded)


def log_in(client, username: str, password: str, address: str = "127.0.0.1"):
    data = {"username": username, "password": password}
    return client.post(reverse("accounts:login"), data, REMOTE_ADDR=address)


# Fifty threads each opening a connection to SQLite's shared in-memory test database trip its
# table locks ("database table is locked") whatever the code under test does: like the other
# races, this one runs on PostgreSQL; tests/accounts/test_limits.py races the limiter itself on
# both.
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_fifty_wrong_passwords_at_once_get_at_most_the_limit_checked(settings, alice):
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    settings.ROLLBACK_LOGIN_FAILURES_LIMIT = 5
    CountingHasher.checked = 0
    barrier = threading.Barrier(50)
    statuses: list[int] = []

    def attempt(n: int) -> None:
        client = Client()
        barrier.wait()
        try:
            statuses.append(log_in(client, "alice", f"guess-{n}", f"192.0.2.{n}").status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert len(statuses) == 50
    assert CountingHasher.checked <= 5
    assert statuses.count(429) >= 45
    assert set(statuses) <= {200, 429}
    refused = log_in(Client(), "alice", "alice-password-1")
    assert refused.status_code == 429
    assert CountingHasher.checked <= 5


def test_after_the_limit_the_right_password_is_refused_too(client, alice, settings):
    settings.ROLLBACK_LOGIN_FAILURES_LIMIT = 5
    for n in range(5):
        assert log_in(client, "alice", f"guess-{n}").status_code == 200

    response = log_in(client, "alice", "alice-password-1")

    assert response.status_code == 429
    assert 14 * 60 < int(response["Retry-After"]) <= 15 * 60
    assert LOCKED in response.content.decode()
    assert 'data-testid="password"' in response.content.decode()
    assert logged_in_user_id(client) is None


def test_a_successful_login_clears_the_failures_of_its_username(client, alice, settings):
    settings.ROLLBACK_LOGIN_FAILURES_LIMIT = 5
    for n in range(4):
        log_in(client, "alice", f"guess-{n}")
    assert log_in(client, "alice", "alice-password-1").status_code == 302
    assert logged_in_user_id(client) == str(alice.pk)
    client.post(reverse("accounts:logout"))

    for n in range(5):  # five more failures: the four before the success no longer count
        assert log_in(client, "alice", f"guess-{n}").status_code == 200
    assert log_in(client, "alice", "alice-password-1").status_code == 429


def test_failures_from_one_address_are_limited_across_usernames(client, alice, settings):
    settings.ROLLBACK_LOGIN_FAILURES_PER_IP = 3
    for name in ("ann", "ben", "cat"):
        assert log_in(client, name, "guess", "198.51.100.7").status_code == 200

    refused = log_in(client, "alice", "alice-password-1", "198.51.100.7")

    assert refused.status_code == 429
    assert LOCKED in refused.content.decode()
    assert log_in(client, "alice", "alice-password-1", "198.51.100.8").status_code == 302


def test_only_failures_count_against_an_address(client, alice, settings):
    settings.ROLLBACK_LOGIN_FAILURES_PER_IP = 3
    log_in(client, "ann", "guess")
    log_in(client, "ben", "guess")
    for _ in range(10):
        assert log_in(client, "alice", "alice-password-1").status_code == 302
        client.post(reverse("accounts:logout"))
    assert log_in(client, "cat", "guess").status_code == 200
    assert log_in(client, "dan", "guess").status_code == 429


def test_an_older_password_hash_still_logs_in_and_is_upgraded_to_argon2(client, alice, settings):
    from rollback_site import settings as site_settings

    settings.PASSWORD_HASHERS = site_settings.PASSWORD_HASHERS  # not the suite's fast hasher
    alice.password = make_password("alice-password-1", hasher="pbkdf2_sha256")
    alice.save(update_fields=["password"])

    response = log_in(client, "alice", "alice-password-1")

    assert response.status_code == 302
    assert logged_in_user_id(client) == str(alice.pk)
    alice.refresh_from_db()
    assert alice.password.startswith("argon2$argon2id$")
    client.post(reverse("accounts:logout"))
    assert log_in(client, "alice", "alice-password-1").status_code == 302


def test_logout_is_by_post_only(alice_client, alice):
    assert alice_client.get(reverse("accounts:logout")).status_code == 405
    assert logged_in_user_id(alice_client) == str(alice.pk)

    response = alice_client.post(reverse("accounts:logout"))

    assert response.status_code == 302
    assert response.url == reverse("accounts:login")
    assert logged_in_user_id(alice_client) is None


def test_password_change_keeps_the_user_logged_in_and_goes_back_to_the_profile(alice_client, alice):
    response = alice_client.post(
        reverse("accounts:password_change"),
        {
            "old_password": "alice-password-1",
            "new_password1": "a-brand-new-secret-4",
            "new_password2": "a-brand-new-secret-4",
        },
        follow=True,
    )
    assert response.redirect_chain[-1][0] == reverse("accounts:profile")
    assert "Your password is changed." in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password("a-brand-new-secret-4")
    assert logged_in_user_id(alice_client) == str(alice.pk)


def test_password_change_with_a_wrong_old_password_changes_nothing(alice_client, alice):
    response = alice_client.post(
        reverse("accounts:password_change"),
        {
            "old_password": "wrong",
            "new_password1": "a-brand-new-secret-4",
            "new_password2": "a-brand-new-secret-4",
        },
    )
    assert response.status_code == 200
    assert "Your old password was entered incorrectly" in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password("alice-password-1")


# --- Profile and preferences ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["accounts:profile", "accounts:password_change"])
def test_pages_need_a_login(client, name):
    url = reverse(name)
    response = client.get(url)
    assert response.status_code == 302
    assert response.url == f"{reverse('accounts:login')}?next={url}"


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("accounts:profile", []),
        ("accounts:apikey_create", []),
        ("accounts:apikey_revoke", [1]),
        ("accounts:password_change", []),
    ],
)
def test_anonymous_posts_are_sent_to_login(client, name, args):
    response = client.post(reverse(name, args=args), {"name": "x", "theme": "dark"})
    assert response.status_code == 302
    assert response.url.startswith(reverse("accounts:login"))
    assert not ApiKey.objects.exists()


def test_profile_shows_the_preferences_form(alice_client):
    response = alice_client.get(reverse("accounts:profile"))
    assert response.status_code == 200
    html = response.content.decode()
    for testid in (
        "auto-checkpoint",
        "theme",
        "save-preferences",
        "api-key-name",
        "create-api-key",
    ):
        assert f'data-testid="{testid}"' in html


def test_preferences_are_saved(alice_client, alice):
    response = alice_client.post(reverse("accounts:profile"), {"theme": "dark"}, follow=True)

    assert response.redirect_chain[-1][0] == reverse("accounts:profile")
    assert "Preferences saved." in response.content.decode()
    alice.refresh_from_db()
    assert alice.metadata["preferences"] == {
        "auto_checkpoint": False,
        "checkpoint_each_message": False,
        "theme": "dark",
    }
    assert 'data-theme="dark"' in response.content.decode()

    alice_client.post(reverse("accounts:profile"), {"theme": "light", "auto_checkpoint": "on"})
    alice.refresh_from_db()
    assert alice.metadata["preferences"] == {
        "auto_checkpoint": True,
        "checkpoint_each_message": False,
        "theme": "light",
    }


def test_a_bad_theme_is_refused_and_nothing_saved(alice_client, alice):
    response = alice_client.post(reverse("accounts:profile"), {"theme": "purple"})
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    alice.refresh_from_db()
    assert alice.metadata == {}


# --- API keys ---------------------------------------------------------------------------------


def test_a_new_api_key_is_shown_once(alice_client, alice):
    response = alice_client.post(reverse("accounts:apikey_create"), {"name": "laptop"})

    # POST, then redirect: the browser ends on a GET, so a refresh makes no other key.
    assert response.status_code == 303
    assert response["Location"] == reverse("accounts:profile") + "#api-keys"
    key = ApiKey.objects.get(user=alice)
    shown = alice_client.get(reverse("accounts:profile"))
    assert "no-store" in shown["Cache-Control"]
    html = shown.content.decode()
    assert 'data-testid="new-api-key"' in html
    assert 'data-testid="copy-api-key"' in html
    start = html.index('data-testid="new-api-key">') + len('data-testid="new-api-key">')
    secret = html[start : html.index("<", start)].strip()
    assert apikey_authenticate(secret) == alice
    assert "will not be shown again" in html

    later = alice_client.get(reverse("accounts:profile")).content.decode()
    assert secret not in later
    assert 'data-testid="new-api-key"' not in later
    assert key.prefix in later
    assert "laptop" in later
    assert ApiKey.objects.filter(user=alice).count() == 1
    assert secret not in str(dict(alice_client.session))


def test_the_new_secret_is_never_whole_in_the_session(alice_client, alice):
    alice_client.post(reverse("accounts:apikey_create"), {"name": "laptop"})
    stored = str(dict(alice_client.session))
    cookie = alice_client.cookies["new_api_key"]
    secret = bytes(
        a ^ b
        for a, b in zip(
            bytes.fromhex(cookie.value),
            bytes.fromhex(alice_client.session["new_api_key"]["pad"]),
            strict=True,
        )
    ).decode()
    assert apikey_authenticate(secret) == alice
    assert secret not in stored
    assert secret not in cookie.value
    assert cookie["httponly"]
    assert cookie["samesite"] == "Strict"
    alice_client.get(reverse("accounts:profile"))
    assert "new_api_key" not in alice_client.session


def test_another_browser_never_sees_the_new_secret(alice_client, alice):
    from django.test import Client

    alice_client.post(reverse("accounts:apikey_create"), {"name": "laptop"})
    other = Client()
    other.force_login(alice)
    page = other.get(reverse("accounts:profile")).content.decode()
    assert 'data-testid="new-api-key"' not in page


def test_api_key_name_errors_are_shown(alice_client):
    response = alice_client.post(reverse("accounts:apikey_create"), {"name": "   "})
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()
    assert not ApiKey.objects.exists()


def test_the_key_limit_is_shown_on_the_form(alice_client, alice):
    for i in range(API_KEYS_ACTIVE_MAX):
        apikey_create(user=alice, name=f"k{i}")
    response = alice_client.post(reverse("accounts:apikey_create"), {"name": "one more"})
    assert response.status_code == 400
    assert "the most allowed" in response.content.decode()


def test_api_key_create_is_post_only(alice_client):
    assert alice_client.get(reverse("accounts:apikey_create")).status_code == 405


def test_profile_lists_keys_with_a_revoke_button_for_active_ones_only(alice_client, alice):
    active, _ = apikey_create(user=alice, name="active one")
    revoked, _ = apikey_create(user=alice, name="revoked one")
    apikey_revoke(user=alice, key_id=revoked.pk)

    html = alice_client.get(reverse("accounts:profile")).content.decode()

    assert html.count('data-testid="api-key-row"') == 2
    assert html.count('data-testid="revoke-api-key"') == 1
    assert reverse("accounts:apikey_revoke", args=[active.pk]) in html
    assert reverse("accounts:apikey_revoke", args=[revoked.pk]) not in html


def test_revoking_a_key_stops_it_working(alice_client, alice):
    key, secret = apikey_create(user=alice, name="laptop")

    response = alice_client.post(reverse("accounts:apikey_revoke", args=[key.pk]), follow=True)

    assert response.redirect_chain[-1][0] == reverse("accounts:profile")
    assert "revoked" in response.content.decode()
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert apikey_authenticate(secret) is None


def test_bob_cannot_revoke_alices_key(client, alice, bob):
    key, secret = apikey_create(user=alice, name="laptop")
    client.force_login(bob)

    response = client.post(reverse("accounts:apikey_revoke", args=[key.pk]))

    assert response.status_code == 404
    key.refresh_from_db()
    assert key.revoked_at is None
    assert apikey_authenticate(secret) == alice


def test_bob_does_not_see_alices_keys(client, alice, bob):
    apikey_create(user=alice, name="alice's laptop")
    client.force_login(bob)
    html = client.get(reverse("accounts:profile")).content.decode()
    assert "alice&#x27;s laptop" not in html
    assert "alice's laptop" not in html


def test_revoking_an_unknown_key_is_not_found(alice_client):
    assert alice_client.post(reverse("accounts:apikey_revoke", args=[999])).status_code == 404


# --- CSRF -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("accounts:apikey_create", {"name": "laptop"}),
        ("accounts:profile", {"theme": "dark"}),
    ],
)
def test_forms_need_the_csrf_token(alice, name, data):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(reverse(name), data).status_code == 403
    assert not ApiKey.objects.exists()
    alice.refresh_from_db()
    assert alice.metadata == {}


def test_signup_needs_the_csrf_token():
    client = Client(enforce_csrf_checks=True)
    assert client.post(reverse("accounts:signup"), signup_data()).status_code == 403
    assert not User.objects.exists()
