"""The API keys recently verified, in the cache (the Django cache: Redis when the app is scaled
out, so every process sees one revocation), so that a request with a key costs no query for it:
a key found here is the key and its user as read from the database at most KEY_CACHE_SECONDS
ago, under the current *version*.

The version is a random token kept in the cache. Anything that may change whether a key is
valid or what its user is (a key saved, revoked or deleted; a user saved, deactivated or
deleted; their preferences changed) replaces it (`keys_changed`): every entry made before is
then ignored, at once, in every process. It is replaced when the change is made and again when
its transaction commits: a request that read the version before the commit and the key's row
before the change cannot leave an entry that outlives it. A version lost from the cache (an
eviction) is a new one: nothing made under the old one is read again. The entries' own short
life bounds what a change made outside the app's code (SQL by hand) leaves behind, and what a
change made while the cache did not answer leaves (the change is saved all the same: a
revocation never waits on Redis; requests meanwhile answer 503, as they cannot read the cache).
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING

from django.core.cache import cache
from django.db import transaction

from core.unavailable import is_unavailable

if TYPE_CHECKING:
    from .models import ApiKey

logger = logging.getLogger(__name__)

KEY_CACHE_SECONDS = 10
VERSION_KEY = "apikeys:version"


def _entry_key(digest: str) -> str:
    return f"apikeys:key:{digest}"


def _new_version() -> str:
    version = secrets.token_hex(8)
    cache.set(VERSION_KEY, version, None)
    return version


def cached_key(digest: str) -> tuple[ApiKey | None, str]:
    """The key of this hash as the cache has it under the current version (or None), and that
    version (to store what the database says under it: `cache_key`). One round trip."""
    got = cache.get_many([VERSION_KEY, _entry_key(digest)])
    version = got.get(VERSION_KEY)
    if not isinstance(version, str):  # the first request, or the version was evicted
        cache.add(VERSION_KEY, secrets.token_hex(8), None)  # unless another process just did
        return None, str(cache.get(VERSION_KEY))
    entry = got.get(_entry_key(digest))
    if isinstance(entry, tuple) and len(entry) == 2 and entry[0] == version:
        return entry[1], version
    return None, version


def cache_key(digest: str, key: ApiKey, version: str) -> None:
    """Keep a key read from the database, under the version read before it was."""
    cache.set(_entry_key(digest), (version, key), KEY_CACHE_SECONDS)


def _replace_version() -> None:
    try:
        _new_version()
    except Exception as error:
        if not is_unavailable(error):
            raise
        logger.warning(
            "The cache did not answer: the API keys it holds are dropped when they expire "
            "(in %s s at most) (%s)",
            KEY_CACHE_SECONDS,
            error,
        )


def keys_changed() -> None:
    """Every cached key is read from the database again: now, and once the change commits."""
    _replace_version()
    transaction.on_commit(_replace_version)
