"""Telegram's Bot API, through python-telegram-bot: the one module that talks to Telegram.

Every function is synchronous and safe from any thread (a request, a Celery task, the relay's
sender thread). Inside, python-telegram-bot's async `Bot` runs on the process's one bridge loop
(`core.bridge`; a Celery prefork child gets its own, and makes its own bots), one `Bot` per token
and API URL, read from the settings at call time. The base URL is
`f"{settings.TELEGRAM_API_URL}/bot"`, so tests point it at a stand-in server.

Failures: a 429 (`RetryAfter`) is waited out and retried (at most 3 tries, at most 60 s of
waiting in all) unless the caller asks for `RateLimited` instead (the relay's streaming edits
postpone themselves); a network error or a timeout is retried once; then `TelegramError`.
"message is not modified" is success for an edit. The token is never logged: the URLs in the
log lines of httpx (which python-telegram-bot uses) are redacted.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import TypeVar

import telegram
from django.conf import settings
from telegram import constants
from telegram import error as tg_error
from telegram.request import HTTPXRequest

from core import bridge
from integrations.telegram.format import EMPTY_REPLY, Piece, render, split_plain

__all__ = [
    "RateLimited",
    "TelegramError",
    "delete_message",
    "delete_webhook",
    "edit_piece",
    "enabled",
    "send_piece",
    "send_text",
    "send_typing",
    "set_webhook",
]

log = logging.getLogger(__name__)

# python-telegram-bot 22 gives time periods (RetryAfter.retry_after) as timedelta when asked, and
# warns on every 429 otherwise (ints are deprecated): ask, as its next major version will do.
os.environ.setdefault("PTB_TIMEDELTA", "true")

T = TypeVar("T")

MAX_TRIES = 3  # per call, when a 429 is waited out
MAX_WAIT = 60.0  # seconds of 429 waiting per call, in all
CALL_TIMEOUT = 30.0  # seconds a caller waits for one attempt on the loop


class TelegramError(Exception):
    """Telegram refused the call, or could not be reached, after the retries."""


class RateLimited(TelegramError):
    """A 429 the caller asked to see (`wait=False`): try again after `retry_after` seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"Too Many Requests: retry after {retry_after:g}")
        self.retry_after = retry_after


# --- the token stays out of the logs ------------------------------------------------------------

_BOT_PATH = re.compile(r"/bot[^/\s'\"]+")


class _RedactToken(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "/bot" in message:
            record.msg, record.args = _BOT_PATH.sub("/bot<token>", message), ()
        return True


for _name in ("httpx", "telegram.request", "telegram._bot", "telegram.Bot"):
    logging.getLogger(_name).addFilter(_RedactToken())


def _scrub(text: str) -> str:
    token = settings.TELEGRAM_BOT_TOKEN
    text = _BOT_PATH.sub("/bot<token>", text)
    return text.replace(token, "<token>") if token else text


# --- one bot per token, on the bridge's loop ----------------------------------------------------

_bots: dict[tuple[str, str], telegram.Bot] = {}
_lock = threading.Lock()


def _forget_bots_after_fork() -> None:
    """A forked child's bots would use the parent's connections, on a loop it does not run."""
    global _lock
    _bots.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_bots_after_fork)


def _bot() -> telegram.Bot:
    token, api = settings.TELEGRAM_BOT_TOKEN, settings.TELEGRAM_API_URL.rstrip("/")
    if not token:
        raise TelegramError("the Telegram bridge is off (TELEGRAM_BOT_TOKEN is empty)")
    with _lock:
        bot = _bots.get((token, api))
        if bot is None:
            request = HTTPXRequest(
                connection_pool_size=8,
                connect_timeout=5.0,
                read_timeout=15.0,
                write_timeout=15.0,
                pool_timeout=5.0,
            )
            bot = telegram.Bot(token, base_url=f"{api}/bot", request=request)
            _bots[(token, api)] = bot
        return bot


def _run(call: Callable[[telegram.Bot], Awaitable[T]]) -> T:
    """One attempt of `call(bot)` on the bridge's loop, from any thread but that loop's."""
    try:
        return bridge.call(call, _bot(), timeout=CALL_TIMEOUT)
    except TimeoutError:
        raise tg_error.TimedOut("no answer from Telegram in time") from None


def _retry_after(exc: tg_error.RetryAfter) -> float:
    wait = exc.retry_after  # a timedelta (PTB_TIMEDELTA), an int in the deprecated default
    seconds = wait.total_seconds() if isinstance(wait, timedelta) else float(wait)
    return max(seconds, 0.0)


def _call(call: Callable[[telegram.Bot], Awaitable[T]], *, what: str, wait: bool = True) -> T:
    """`call` with the retries: 429s waited out (bounded) or raised as RateLimited, one retry
    after a network error or a timeout; anything else refused is a TelegramError."""
    waited = 0.0
    network_retried = False
    tries = 0
    while True:
        tries += 1
        try:
            return _run(call)
        except tg_error.RetryAfter as exc:
            delay = _retry_after(exc)
            if not wait:
                raise RateLimited(delay) from None
            if tries >= MAX_TRIES or waited + delay > MAX_WAIT:
                raise TelegramError(f"{what}: rate limited (retry after {delay:g} s)") from None
            log.info("telegram: %s rate limited, retrying in %g s", what, delay)
            time.sleep(delay)
            waited += delay
        except (tg_error.BadRequest, tg_error.Forbidden, tg_error.InvalidToken) as exc:
            raise TelegramError(f"{what}: {_scrub(str(exc))}") from None
        except tg_error.NetworkError as exc:  # TimedOut too (BadRequest is caught above)
            if network_retried:
                raise TelegramError(f"{what}: unreachable: {_scrub(str(exc))}") from None
            network_retried = True
            time.sleep(0.2)
        except tg_error.TelegramError as exc:
            raise TelegramError(f"{what}: {_scrub(str(exc))}") from None


# --- the calls ---------------------------------------------------------------------------------


def enabled() -> bool:
    """The bridge is on: a bot token is set."""
    return bool(settings.TELEGRAM_BOT_TOKEN)


def send_piece(chat_id: int, piece: Piece, *, wait: bool = True) -> int:
    """Send one message (at most 4,096 UTF-16 units, see format.py); returns its id."""

    async def call(bot: telegram.Bot) -> int:
        message = await bot.send_message(
            chat_id,
            piece.text,
            entities=piece.telegram_entities() or None,
            link_preview_options=telegram.LinkPreviewOptions(is_disabled=True),
        )
        return message.message_id

    return _call(call, what="sendMessage", wait=wait)


def edit_piece(chat_id: int, message_id: int, piece: Piece, *, wait: bool = True) -> None:
    """Show `piece` in a message sent before; an edit that changes nothing is fine."""

    async def call(bot: telegram.Bot) -> None:
        try:
            await bot.edit_message_text(
                piece.text,
                chat_id=chat_id,
                message_id=message_id,
                entities=piece.telegram_entities() or None,
                link_preview_options=telegram.LinkPreviewOptions(is_disabled=True),
            )
        except tg_error.BadRequest as exc:
            if "not modified" not in str(exc).lower():
                raise

    _call(call, what="editMessageText", wait=wait)


def delete_message(chat_id: int, message_id: int) -> None:
    """Delete a message sent before; one already gone is fine."""

    async def call(bot: telegram.Bot) -> None:
        try:
            await bot.delete_message(chat_id, message_id)
        except tg_error.BadRequest as exc:
            if "not found" not in str(exc).lower():
                raise

    _call(call, what="deleteMessage")


def send_text(chat_id: int, text: str, *, markdown: bool = False) -> list[int]:
    """Send `text` as one or more messages (split at 4,096 UTF-16 units); with `markdown`, it is
    rendered into Telegram's text and entities first (format.render). Returns the message ids.
    A message that fails after its retries raises TelegramError (those sent before stay)."""
    pieces: Sequence[Piece] = render(text) if markdown else split_plain(text)
    pieces = pieces or [Piece(EMPTY_REPLY)]
    return [send_piece(chat_id, piece) for piece in pieces]


def send_typing(chat_id: int) -> None:
    """Show "typing…" in the chat for a few seconds. Never raises: it is only a hint."""
    try:
        _call(
            lambda bot: bot.send_chat_action(chat_id, constants.ChatAction.TYPING),
            what="sendChatAction",
            wait=False,
        )
    except Exception as exc:
        log.info("telegram: no typing hint for a chat: %s", _scrub(str(exc)))


def set_webhook(url: str, *, secret: str) -> None:
    """Have Telegram post updates to `url`, with `secret` in X-Telegram-Bot-Api-Secret-Token."""

    async def call(bot: telegram.Bot) -> None:
        await bot.set_webhook(
            url,
            secret_token=secret or None,
            allowed_updates=[constants.UpdateType.MESSAGE],
        )

    _call(call, what="setWebhook")


def delete_webhook() -> None:
    """Stop Telegram's posting of updates."""

    async def call(bot: telegram.Bot) -> None:
        await bot.delete_webhook()

    _call(call, what="deleteWebhook")
