"""Fixtures of the Telegram bridge's tests: the stand-in for Telegram's Bot API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.telegram_server import FakeTelegram

WEBHOOK_SECRET = "s3cret-test"  # noqa: S105 (a test value)


@pytest.fixture
def telegram(settings) -> Iterator[FakeTelegram]:
    """A started stand-in for Telegram (tests/fakes/telegram_server.py), the settings pointing
    at it: TELEGRAM_BOT_TOKEN (the bridge on), TELEGRAM_WEBHOOK_SECRET, TELEGRAM_API_URL."""
    with FakeTelegram() as server:
        settings.TELEGRAM_BOT_TOKEN = server.token
        settings.TELEGRAM_WEBHOOK_SECRET = WEBHOOK_SECRET
        settings.TELEGRAM_API_URL = server.url
        yield server
