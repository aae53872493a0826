"""The channel layers, as settings.CHANNEL_LAYERS names them: channels' own, made to say when
they drop a message.

A channel layer is best-effort: past its `capacity` it drops what is sent. channels_redis checks
the capacity against one inbox per web process, which all the process's sockets share, and says
so only at INFO ("... channels over capacity in group ..."); the in-memory layer drops without a
word. Nothing a reader must have depends on the layer (a socket reads a reply's pieces and a
turn's end back from the store and the database: web/ws/consumers.py), but a drop means the
layer is too small for the load, so each one is a WARNING here and is counted, across processes,
in the cache (`drops_total`, shown by /healthz).

- `RedisChannelLayer` is channels_redis's: a message that `send` refuses (ChannelFull) is counted,
  and its `group_send`'s INFO line is taken by a filter on its logger, which counts the channels
  it names and says it again as a WARNING of this module; a process-local channel's buffer that
  overflows (its oldest message dropped) is counted too.
- `InMemoryChannelLayer` is channels': `send` refusing a message (its `group_send` ignores that)
  is counted. Its queues belong to the event loop of the sockets that read them (the server's),
  so a `group_send` made on any other loop (the publisher's, `core.bridge`) is handed to that
  loop, in the order sent, and the layer's state is only ever touched there.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer as BaseInMemoryChannelLayer
from channels_redis.core import BoundedQueue
from channels_redis.core import RedisChannelLayer as BaseRedisChannelLayer
from django.core.cache import caches

log = logging.getLogger(__name__)

# The number of messages the channel layers dropped, in every process (the cache is shared).
DROPS_KEY = "core:channel-layer:drops"
# The cache alias: the health check's (short timeouts on Redis), so a drop counted while Redis
# struggles never holds the publisher for long.
CACHE_ALIAS = "health"


def drops_record(count: int, where: str) -> None:
    """Say that the channel layer dropped `count` messages (for `where`), and count them. Never
    fails: a count that cannot be stored is only logged."""
    if count <= 0:
        return
    log.warning(
        "the channel layer dropped %s message(s) for %s: it is over its capacity "
        "(CHANNEL_LAYER_CAPACITY); sockets read what they missed back from the store",
        count,
        where,
    )
    cache = caches[CACHE_ALIAS]
    try:
        if not cache.add(DROPS_KEY, count, timeout=None):
            cache.incr(DROPS_KEY, count)
    except Exception:
        log.warning("could not count the channel layer's drops", exc_info=True)


def drops_total() -> int:
    """The messages dropped so far, in every process (0 when none was, or the count is gone)."""
    found = caches[CACHE_ALIAS].get(DROPS_KEY)
    return found if isinstance(found, int) else 0


class _OverCapacityFilter(logging.Filter):
    """On channels_redis's logger: its "N of M channels over capacity in group G" line (INFO) is
    counted and said again as a WARNING (`drops_record`); other lines pass as they are."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (
            isinstance(record.msg, str)
            and "channels over capacity" in record.msg
            and isinstance(args, tuple)
            and len(args) == 3
            and isinstance(args[0], int)
        ):
            drops_record(args[0], f"group {args[2]}")
            return False
        return True


_filter = _OverCapacityFilter()


def _watch_redis_logger() -> None:
    """Have channels_redis's INFO line made (whatever the configured level) and filtered."""
    logger = logging.getLogger("channels_redis.core")
    if _filter not in logger.filters:
        logger.addFilter(_filter)
    if not logger.isEnabledFor(logging.INFO):
        logger.setLevel(logging.INFO)


class _CountingQueue(BoundedQueue):  # type: ignore[misc]  # channels_redis is untyped
    """A process-local channel's buffer: full, it drops its oldest message (channels_redis's
    choice for a consumer that stopped reading), counted here."""

    def put_nowait(self, item: Any) -> None:
        if self.full():
            drops_record(1, "a socket that does not read")
        super().put_nowait(item)


class _CountingSend:
    """A layer's `send` that counts a refusal (ChannelFull) as a drop before raising it."""

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        try:
            await super().send(channel, message)  # type: ignore[misc]  # the layer's own
        except ChannelFull:
            drops_record(1, f"channel {channel}")
            raise


class RedisChannelLayer(_CountingSend, BaseRedisChannelLayer):  # type: ignore[misc]  # untyped
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _watch_redis_logger()
        self.receive_buffer: collections.defaultdict[str, asyncio.Queue[Any]] = (
            collections.defaultdict(functools.partial(_CountingQueue, self.capacity))
        )


class InMemoryChannelLayer(_CountingSend, BaseInMemoryChannelLayer):  # type: ignore[misc]  # untyped
    # The loop of the last socket that joined a group: the web server's (in tests, the test's).
    home: asyncio.AbstractEventLoop | None = None

    async def group_add(self, group: str, channel: str) -> None:
        self.home = asyncio.get_running_loop()
        await super().group_add(group, channel)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """On the sockets' loop: handed to it from any other (not waited for, so a caller that
        holds that loop cannot wait for itself; the loop runs what it is handed in order)."""
        home = self.home
        if home is None or home.is_closed() or home is asyncio.get_running_loop():
            await super().group_send(group, message)
            return
        asyncio.run_coroutine_threadsafe(super().group_send(group, message), home)
