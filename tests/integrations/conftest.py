"""Fixtures of the Telegram bridge's tests: the stand-in for Telegram's Bot API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.telegram_server import FakeTelegram

WEBHOOK_SECRET = "s3cret-test"  # noqa: S105 (a test value)


@pytest.fixture(autouse=True)
def _relay_settles() -> Iterator[None]:
    """No turn or Telegram delivery of a test outlives it: its turns end (the embedded pool
    drained) and the relay has nothing left to send before the database is emptied."""
    yield
    from agents.dispatch import drain
    from integrations.telegram import relay

    drain()
    relay.idle(15)


@pytest.fixture
def telegram(settings) -> Iterator[FakeTelegram]:
    """A started stand-in for Telegram (tests/fakes/telegram_server.py), the settings pointing
    at it: TELEGRAM_BOT_TOKEN (the bridge on), TELEGRAM_WEBHOOK_SECRET, TELEGRAM_API_URL; and
    edits of a chat 50 ms apart instead of Telegram's 1 s (TELEGRAM_EDIT_SECONDS)."""
    settings.TELEGRAM_EDIT_SECONDS = 0.05
    with FakeTelegram() as server:
        settings.TELEGRAM_BOT_TOKEN = server.token
        settings.TELEGRAM_WEBHOOK_SECRET = WEBHOOK_SECRET
        settings.TELEGRAM_API_URL = server.url
        yield server
