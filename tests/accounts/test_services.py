from __future__ import annotations

import hashlib
import threading
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from accounts.errors import (
    ApiKeyLimitReached,
    ApiKeyNotFound,
    InvalidApiKeyName,
    InvalidPreference,
    InvalidUsername,
    SignupClosed,
    SignupLimited,
    UsernameTaken,
    WeakPassword,
)
from accounts.models import ApiKey, SiteSettings, User
from accounts.services import (
    API_KEYS_ACTIVE_MAX,
    apikey_authenticate,
    apikey_create,
    apikey_revoke,
    preferences_update,
    signup_is_open,
    user_signup,
)
from core.errors import DomainError, InvalidInput, NotFound

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery-9"  # noqa: S105 - a test user's password


def close_signup() -> None:
    SiteSettings.objects.update_or_create(pk=1, defaults={"signup_open": False})


# --- Sign-up ----------------------------------------------------------------------------------


def test_first_signup_becomes_the_admin_and_the_second_does_not():
    first = user_signup(username="ada", password=PASSWORD, email="ada@example.com")
    second = user_signup(username="grace", password=PASSWORD)

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.is_staff, first.is_superuser) == (True, True)
    assert (second.is_staff, second.is_superuser) == (False, False)
    assert first.check_password(PASSWORD)
    assert first.email == "ada@example.com"


def test_signup_works_without_a_site_settings_row():
    SiteSettings.objects.all().delete()
    user = user_signup(username="ada", password=PASSWORD)
    assert user.is_superuser
    assert SiteSettings.objects.get(pk=1).signup_open


def test_closed_signup_is_refused_once_a_user_exists(alice):
    close_signup()
    assert not signup_is_open()
    with pytest.raises(SignupClosed) as caught:
        user_signup(username="carol", password=PASSWORD)
    assert caught.value.message == (
        "Sign-up is closed on this server; ask an administrator for an account."
    )
    assert isinstance(caught.value, DomainError)
    assert not User.objects.filter(username="carol").exists()


def test_the_first_account_can_be_made_even_when_signup_is_closed():
    close_signup()
    assert signup_is_open()
    user = user_signup(username="ada", password=PASSWORD)
    assert user.is_superuser
    with pytest.raises(SignupClosed):
        user_signup(username="grace", password=PASSWORD)


@pytest.mark.parametrize("password", ["short", "password123", "12345678901234", "ada-lovelace"])
def test_weak_password_is_refused_with_djangos_messages_and_nothing_created(password):
    with pytest.raises(WeakPassword) as caught:
        user_signup(username="ada-lovelace", password=password)
    assert caught.value.messages
    assert isinstance(caught.value, InvalidInput)
    assert not User.objects.exists()


@pytest.mark.parametrize("username", ["ALICE", "Alice", "alice", " alice "])
def test_username_taken_in_any_case_is_refused_and_nothing_created(alice, username):
    with pytest.raises(UsernameTaken):
        user_signup(username=username, password=PASSWORD)
    assert User.objects.count() == 1


@pytest.mark.parametrize("username", ["", "   ", "has space", "semi;colon", "x" * 151, None])
def test_malformed_username_is_refused(username):
    with pytest.raises(InvalidUsername):
        user_signup(username=username, password=PASSWORD)
    assert not User.objects.exists()


def test_malformed_email_is_refused():
    with pytest.raises(InvalidInput) as caught:
        user_signup(username="ada", password=PASSWORD, email="not an email")
    assert caught.value.field == "email"
    assert not User.objects.exists()


def test_a_username_mixing_scripts_is_refused():
    with pytest.raises(InvalidUsername) as caught:
        user_signup(username="\u0430lice", password=PASSWORD)  # a Cyrillic "\u0430"
    assert caught.value.message == (
        "Use letters of one script in a username: this one mixes Cyrillic and Latin."
    )
    assert not User.objects.exists()


@pytest.mark.parametrize(
    ("existing", "lookalike"),
    [
        ("ace", "\u0430\u0441\u0435"),  # all Cyrillic
        ("bob", "b0b"),
        ("paypal", "paypaI"),
        ("modern", "rnodern"),
        ("kate", "\u039a\u0391\u03a4\u0395"),  # all Greek capitals
    ],
)
def test_a_username_that_looks_like_an_existing_one_is_refused(existing, lookalike):
    User.objects.create_user(existing, password=PASSWORD)  # as the admin or the shell would
    with pytest.raises(UsernameTaken) as caught:
        user_signup(username=lookalike, password=PASSWORD)
    assert caught.value.message == "That username looks like an existing one; choose another."
    assert User.objects.count() == 1


@pytest.mark.parametrize("username", ["José", "Ольга", "田中さん", "ada_2", "ada.lovelace@home"])
def test_usernames_of_one_script_that_look_like_no_one_are_accepted(alice, username):
    user = user_signup(username=username, password=PASSWORD)
    assert user.username == username


def test_signups_from_one_address_are_limited_per_hour(settings):
    settings.ROLLBACK_SIGNUPS_PER_HOUR_PER_IP = 2
    user_signup(username="ada", password=PASSWORD, client_ip="203.0.113.5")
    user_signup(username="grace", password=PASSWORD, client_ip="203.0.113.5")

    with pytest.raises(SignupLimited) as caught:
        user_signup(username="hedy", password=PASSWORD, client_ip="203.0.113.5")

    assert caught.value.message == "Too many sign-ups from your network; try again in 60 minutes."
    assert not User.objects.filter(username="hedy").exists()
    user_signup(username="hedy", password=PASSWORD, client_ip="203.0.113.6")


def test_invalid_signups_do_not_use_up_the_limit(settings):
    settings.ROLLBACK_SIGNUPS_PER_HOUR_PER_IP = 1
    for _ in range(3):
        with pytest.raises(WeakPassword):
            user_signup(username="ada", password="short", client_ip="203.0.113.5")  # noqa: S106 - a test user's password
    user_signup(username="ada", password=PASSWORD, client_ip="203.0.113.5")
    with pytest.raises(SignupLimited):
        user_signup(username="grace", password=PASSWORD, client_ip="203.0.113.5")


def test_signup_stores_the_password_with_argon2(settings):
    from rollback_site import settings as site_settings

    settings.PASSWORD_HASHERS = site_settings.PASSWORD_HASHERS  # not the suite's fast hasher
    user = user_signup(username="ada", password=PASSWORD)
    user.refresh_from_db()
    assert user.password.startswith("argon2$argon2id$")
    assert user.check_password(PASSWORD)


def _sign_up_at_once(usernames: list[str]) -> list[BaseException]:
    barrier = threading.Barrier(len(usernames))
    errors: list[BaseException] = []

    def sign_up(username: str) -> None:
        try:
            barrier.wait()
            user_signup(username=username, password=PASSWORD)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=sign_up, args=(name,)) for name in usernames]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_simultaneous_first_signups_make_exactly_one_admin(settings):
    # A fast hasher, so that the threads reach the database together rather than one by one;
    # several rounds, as a race may not show in one.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    for round_ in range(5):
        User.objects.all().delete()
        usernames = [f"racer{round_}-{i}" for i in range(5)]

        assert _sign_up_at_once(usernames) == []

        assert sorted(User.objects.values_list("username", flat=True)) == usernames
        assert User.objects.filter(is_superuser=True).count() == 1, f"round {round_}"
        assert User.objects.filter(is_staff=True).count() == 1, f"round {round_}"


# --- Preferences ------------------------------------------------------------------------------


def test_preferences_are_saved_keeping_other_metadata(alice):
    alice.metadata = {"preferences": {"language": "fr", "theme": "light"}, "note": "kept"}
    alice.save()

    preferences_update(user=alice, auto_checkpoint=False, theme="dark")

    alice.refresh_from_db()
    assert alice.metadata == {
        "preferences": {"language": "fr", "theme": "dark", "auto_checkpoint": False},
        "note": "kept",
    }
    assert alice.preference("auto_checkpoint") is False
    assert alice.preference("theme") == "dark"


def test_preferences_replace_preferences_that_are_not_an_object(alice):
    alice.metadata = {"preferences": ["junk"]}
    alice.save()
    preferences_update(user=alice, auto_checkpoint=True, theme="system")
    alice.refresh_from_db()
    assert alice.metadata["preferences"] == {"auto_checkpoint": True, "theme": "system"}


@pytest.mark.parametrize("theme", ["purple", "", "Dark", None])
def test_unknown_theme_is_refused_and_nothing_saved(alice, theme):
    with pytest.raises(InvalidPreference) as caught:
        preferences_update(user=alice, auto_checkpoint=True, theme=theme)
    assert caught.value.field == "theme"
    alice.refresh_from_db()
    assert alice.metadata == {}


def test_auto_checkpoint_must_be_a_bool(alice):
    with pytest.raises(InvalidPreference):
        preferences_update(user=alice, auto_checkpoint="no", theme="dark")


# --- API keys ---------------------------------------------------------------------------------


def test_apikey_create_stores_only_the_hash_of_the_secret(alice):
    key, secret = apikey_create(user=alice, name="  laptop  ")

    assert secret.startswith("rbk_")
    assert len(secret) == 4 + 43
    assert key.name == "laptop"
    assert key.prefix == secret[:12]
    row = ApiKey.objects.filter(pk=key.pk).values(*[f.attname for f in ApiKey._meta.fields])
    for column, value in row.get().items():
        assert secret not in str(value), column
    assert key.key_hash == hashlib.sha256(secret.encode()).hexdigest()


def test_each_key_is_different(alice):
    secrets = {apikey_create(user=alice, name=f"k{i}")[1] for i in range(5)}
    assert len(secrets) == 5


@pytest.mark.parametrize("name", ["", "   ", "x" * 101, None, 42])
def test_apikey_name_must_be_given_and_short(alice, name):
    with pytest.raises(InvalidApiKeyName):
        apikey_create(user=alice, name=name)
    assert not ApiKey.objects.exists()


def test_a_name_of_100_characters_is_accepted(alice):
    key, _ = apikey_create(user=alice, name="x" * 100)
    assert len(key.name) == 100


def test_at_most_50_active_keys_per_user_and_revoked_ones_do_not_count(alice, bob):
    keys = [apikey_create(user=alice, name=f"k{i}")[0] for i in range(API_KEYS_ACTIVE_MAX)]
    with pytest.raises(ApiKeyLimitReached):
        apikey_create(user=alice, name="one too many")
    apikey_create(user=bob, name="bob's own")  # the limit is per user

    apikey_revoke(user=alice, key_id=keys[0].pk)
    apikey_create(user=alice, name="replacement")
    assert ApiKey.objects.for_user(alice).active().count() == API_KEYS_ACTIVE_MAX


def test_apikey_authenticate_finds_the_owner_until_the_key_is_revoked(alice):
    key, secret = apikey_create(user=alice, name="laptop")
    assert apikey_authenticate(secret) == alice

    revoked = apikey_revoke(user=alice, key_id=key.pk)

    assert revoked.revoked_at is not None
    assert apikey_authenticate(secret) is None


def test_apikey_authenticate_refuses_the_key_of_a_deactivated_user(alice):
    _, secret = apikey_create(user=alice, name="laptop")
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert apikey_authenticate(secret) is None


def test_apikey_authenticate_records_use_at_most_once_a_minute(alice):
    key, secret = apikey_create(user=alice, name="laptop")
    assert key.last_used_at is None

    apikey_authenticate(secret)
    key.refresh_from_db()
    first = key.last_used_at
    assert first is not None

    apikey_authenticate(secret)
    key.refresh_from_db()
    assert key.last_used_at == first

    # Two minutes later: the key's entry in the cache (accounts.key_cache) is long gone.
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=first - timedelta(minutes=2))
    cache.clear()
    apikey_authenticate(secret)
    key.refresh_from_db()
    assert key.last_used_at > first - timedelta(seconds=1)
    assert timezone.now() - key.last_used_at < timedelta(minutes=1)


@pytest.fixture
def bobs_revoked_secret(bob):
    key, secret = apikey_create(user=bob, name="old")
    apikey_revoke(user=bob, key_id=key.pk)
    return secret


@pytest.mark.parametrize(
    "raw",
    [None, "", "rbk_", "x" * 5000, "rbk_ñ", "rbk_" + "ñ" * 43, "rbk_" + "A" * 43, 42, b"rbk_x"],
)
def test_apikey_authenticate_refuses_garbage(alice, raw):
    apikey_create(user=alice, name="laptop")
    assert apikey_authenticate(raw) is None


def test_apikey_authenticate_refuses_another_users_revoked_key(alice, bobs_revoked_secret):
    apikey_create(user=alice, name="laptop")
    assert apikey_authenticate(bobs_revoked_secret) is None


def test_apikey_authenticate_refuses_a_key_with_a_changed_character(alice):
    _, secret = apikey_create(user=alice, name="laptop")
    changed = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    assert apikey_authenticate(changed) is None
    assert apikey_authenticate(secret + "A") is None


def test_another_users_key_cannot_be_revoked(alice, bob):
    key, secret = apikey_create(user=alice, name="laptop")
    with pytest.raises(ApiKeyNotFound) as caught:
        apikey_revoke(user=bob, key_id=key.pk)
    assert isinstance(caught.value, NotFound)
    key.refresh_from_db()
    assert key.revoked_at is None
    assert apikey_authenticate(secret) == alice


@pytest.mark.parametrize("key_id", [0, -1, 10**6, 2**63, "abc", None])
def test_unknown_key_ids_are_not_found(alice, key_id):
    with pytest.raises(ApiKeyNotFound):
        apikey_revoke(user=alice, key_id=key_id)


def test_revoking_twice_keeps_the_first_revocation_time(alice):
    key, _ = apikey_create(user=alice, name="laptop")
    first = apikey_revoke(user=alice, key_id=key.pk).revoked_at
    assert apikey_revoke(user=alice, key_id=key.pk).revoked_at == first
