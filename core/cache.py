"""The cache on Redis, with one client (and so one pool of connections) per process.

Django keeps a cache object per thread and per async context (`caches` is an asgiref Local), and
its RedisCache makes a Redis client, a connection pool and so a new connection for each: in the
served process that was every HTTP request's context and every socket's, each paying for a TCP
connection, redis-py's handshake and its version lookup on the disk (`CLIENT SETINFO`), and
leaving the connection open until the object was collected. Measured under the benchmark's 100
streams, making those connections was about a tenth of a web process's CPU. Here every cache
object of a process with the same servers and options shares one client: redis-py's pool is
thread-safe and starts afresh in a forked child.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property

_clients: dict[tuple[int, tuple[str, ...], str], RedisCacheClient] = {}
_lock = threading.Lock()


class SharedRedisCache(RedisCache):
    """Django's RedisCache, its client shared by the process (see the module's docstring)."""

    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._shared_servers = re.split("[;,]", server) if isinstance(server, str) else server
        self._shared_options: dict[str, Any] = params.get("OPTIONS", {})

    @cached_property
    def _cache(self) -> RedisCacheClient:
        options = self._shared_options
        key = (os.getpid(), tuple(self._shared_servers), repr(sorted(options.items())))
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = RedisCacheClient(self._shared_servers, **options)
            return client
