"""API keys verified from the cache (accounts.key_cache): a key seen just now costs no query, and
whatever may change whether it is valid or who its user is takes effect at once."""

from __future__ import annotations

import hashlib
import logging

import pytest
import redis.exceptions
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.key_cache import VERSION_KEY, cache_key, cached_key
from accounts.models import ApiKey
from accounts.services import (
    apikey_create,
    apikey_revoke,
    apikey_verify,
    preferences_update,
    user_deactivate,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def raw(alice) -> str:
    return apikey_create(user=alice, name="script")[1]


def digest_of(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def queries(fn) -> tuple[object, int]:
    with CaptureQueriesContext(connection) as seen:
        result = fn()
    return result, len(seen.captured_queries)


def test_a_key_verified_again_costs_no_query(raw, alice):
    first, asked = queries(lambda: apikey_verify(raw))
    again, asked_again = queries(lambda: apikey_verify(raw))

    assert first.user == alice
    assert asked >= 1
    assert again.pk == first.pk
    assert again.user == alice
    assert asked_again == 0


def test_a_revoked_key_is_refused_at_once(raw, alice):
    key = apikey_verify(raw)

    apikey_revoke(user=alice, key_id=key.pk)

    assert apikey_verify(raw) is None


def test_an_entry_made_while_the_revocation_was_not_yet_committed_is_not_used(
    raw, alice, django_capture_on_commit_callbacks
):
    stale = apikey_verify(raw)
    with django_capture_on_commit_callbacks(execute=True):
        apikey_revoke(user=alice, key_id=stale.pk)
        # A request of another process read the row before the revocation was committed, and
        # the version after it was replaced: it keeps the key as valid.
        _, version = cached_key(digest_of(raw))
        cache_key(digest_of(raw), stale, version)

    assert apikey_verify(raw) is None


def test_a_deactivated_user_or_one_saved_inactive_is_refused_at_once(raw, alice, bob):
    apikey_verify(raw)
    user_deactivate(user=alice)
    assert apikey_verify(raw) is None

    other = apikey_create(user=bob, name="script")[1]
    apikey_verify(other)
    bob.is_active = False
    bob.save()  # as the admin's form saves it
    assert apikey_verify(other) is None


def test_a_deleted_key_or_user_is_refused_at_once(raw, alice, bob):
    apikey_verify(raw)
    ApiKey.objects.filter(user=alice).delete()
    assert apikey_verify(raw) is None

    other = apikey_create(user=bob, name="script")[1]
    apikey_verify(other)
    bob.delete()
    assert apikey_verify(other) is None


def test_the_user_read_with_a_key_has_their_new_preferences(raw, alice):
    apikey_verify(raw)

    preferences_update(user=alice, auto_checkpoint=False, theme="dark", instructions="Be brief.")

    prefs = apikey_verify(raw).user.metadata["preferences"]
    assert (prefs["theme"], prefs["instructions"]) == ("dark", "Be brief.")


def test_a_version_lost_from_the_cache_makes_every_entry_read_again(raw, alice):
    key = apikey_verify(raw)
    # A change made outside the app's code (SQL by hand) replaces no version...
    ApiKey.objects.filter(pk=key.pk).update(name="renamed")
    assert apikey_verify(raw).name == "script"
    # ...but once the version is gone (an eviction), nothing made under it is read again.
    cache.delete(VERSION_KEY)

    assert apikey_verify(raw).name == "renamed"


def test_a_revocation_while_the_cache_does_not_answer_is_saved_and_said(
    raw, alice, caplog, monkeypatch
):
    key = apikey_verify(raw)

    def refused(*args: object, **kwargs: object) -> None:
        raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:1")

    with monkeypatch.context() as patched:
        patched.setattr(cache, "set", refused)
        with caplog.at_level(logging.WARNING, logger="accounts.key_cache"):
            apikey_revoke(user=alice, key_id=key.pk)

    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    assert "The cache did not answer" in caplog.text


def test_any_other_error_of_the_cache_is_not_hidden(raw, alice, monkeypatch):
    key = apikey_verify(raw)
    monkeypatch.setattr(cache, "set", lambda *a, **k: 1 / 0)

    with pytest.raises(ZeroDivisionError):
        apikey_revoke(user=alice, key_id=key.pk)
