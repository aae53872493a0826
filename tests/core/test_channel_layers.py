"""A channel layer that drops a message says so as a WARNING and counts it, in every process,
and /healthz shows the count (core.channel_layers)."""

from __future__ import annotations

import logging
import uuid

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import Client

from core.channel_layers import InMemoryChannelLayer, RedisChannelLayer, drops_total

pytestmark = pytest.mark.django_db


def _dropped_in_healthz() -> int:
    body = Client().get("/healthz").json()
    return body["channel_layer"]["dropped"]


def test_the_in_memory_layer_warns_of_a_dropped_message_and_healthz_counts_it(caplog):
    layer = InMemoryChannelLayer(capacity=1)
    before = _dropped_in_healthz()

    async def run() -> None:
        await layer.group_add("rollback.session.1", "reader.inmemory!nobody")
        for n in range(3):  # nobody reads: the 2nd and 3rd are over capacity
            await layer.group_send("rollback.session.1", {"type": "rollback.event", "n": n})

    with caplog.at_level(logging.WARNING, logger="core.channel_layers"):
        async_to_sync(run)()
    warned = [r for r in caplog.records if r.name == "core.channel_layers"]
    assert len(warned) == 2
    assert all(r.levelno == logging.WARNING for r in warned)
    assert "CHANNEL_LAYER_CAPACITY" in warned[0].getMessage()
    assert drops_total() == before + 2
    assert _dropped_in_healthz() == before + 2


@pytest.mark.redis
def test_the_redis_layer_warns_of_a_group_send_over_capacity_and_healthz_counts_it(caplog):
    assert settings.REDIS_URL
    layer = RedisChannelLayer(
        hosts=[settings.REDIS_URL], capacity=2, prefix=f"test-drops-{uuid.uuid4().hex[:8]}"
    )
    before = _dropped_in_healthz()

    async def run() -> None:
        channel = await layer.new_channel("reader.")  # a process inbox nobody reads
        await layer.group_add("rollback.session.1", channel)
        for n in range(5):  # three over capacity
            await layer.group_send("rollback.session.1", {"type": "rollback.event", "n": n})
        await layer.flush()

    with caplog.at_level(logging.INFO, logger="channels_redis.core"):
        async_to_sync(run)()
    warned = [r for r in caplog.records if "over its capacity" in r.getMessage()]
    assert len(warned) == 3
    assert all(r.levelno == logging.WARNING and r.name == "core.channel_layers" for r in warned)
    assert not [r for r in caplog.records if "channels over capacity" in r.getMessage()]
    assert _dropped_in_healthz() == before + 3
