"""The cache on Redis keeps one client per process (core.cache): a cache object made for each
request's context and each thread (Django keeps one per context) shares its connections."""

from __future__ import annotations

import contextvars
import threading
import uuid

import pytest
import redis
from django.core.cache import caches

pytestmark = pytest.mark.redis


def test_every_context_and_thread_of_a_process_shares_one_connection_to_the_cache(settings):
    assert settings.REDIS_URL
    name = f"rollback-test-{uuid.uuid4().hex[:8]}"
    default = settings.CACHES["default"]
    settings.CACHES = {
        **settings.CACHES,
        "default": {**default, "OPTIONS": {**default["OPTIONS"], "client_name": name}},
    }
    held = []  # each context's cache object, kept (Django drops it with its context)

    def use() -> None:
        cache = caches["default"]
        held.append(cache)
        cache.set(f"{name}:key", 1)
        assert cache.get(f"{name}:key") == 1

    for _ in range(20):  # as each request or socket call runs, in a context of its own
        contextvars.Context().run(use)
    for _ in range(20):  # and on threads of their own, one after another
        thread = threading.Thread(target=use)
        thread.start()
        thread.join()

    assert len({id(cache) for cache in held}) == 40  # Django made a cache object for each
    server = redis.Redis.from_url(settings.REDIS_URL)
    connections = [c for c in server.client_list() if c.get("name") == name]
    assert len(connections) == 1
    caches["default"].delete(f"{name}:key")
