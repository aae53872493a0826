"""How many link codes (`/start CODE`) a chat, and a Telegram user in all their chats, may try:
counters in the cache (core.limits), TELEGRAM_LINK_ATTEMPTS_PER_CHAT and
TELEGRAM_LINK_ATTEMPTS_PER_USER within TELEGRAM_LINK_WINDOW_SECONDS. An attempt takes its places
before the code is looked up; a code that links clears the counts.

Past a limit the chat is told once when it may try again (the refusal is marked in the cache for
the rest of the window); the webhook then drops the later attempts of that chat or user
(`link_attempts_spent`) without a task or an answer, so a guesser's flood costs a cache read
each, not a worker and a message to Telegram.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from core.limits import Counter, counter

from .errors import LinkAttemptsLimited

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LinkAttempt:
    """The places one link attempt holds."""

    counters: tuple[Counter, ...]

    def succeeded(self) -> None:
        """The chat is linked: its counts (and its user's) start again."""
        for taken in self.counters:
            taken.clear()
            cache.delete(_told(taken))


def _told(limit: Counter) -> str:
    """The mark of a refusal answered in the counter's window."""
    return f"{limit.key}:told"


def _counters(chat_id: int, user_id: int | None) -> list[Counter]:
    window = int(settings.TELEGRAM_LINK_WINDOW_SECONDS)
    counters = [
        counter(
            "telegram-link-chat",
            str(chat_id),
            limit=int(settings.TELEGRAM_LINK_ATTEMPTS_PER_CHAT),
            seconds=window,
        )
    ]
    if user_id is not None:
        counters.append(
            counter(
                "telegram-link-user",
                str(user_id),
                limit=int(settings.TELEGRAM_LINK_ATTEMPTS_PER_USER),
                seconds=window,
            )
        )
    return counters


def link_attempt_start(*, chat_id: int, user_id: int | None) -> LinkAttempt:
    """Take a place for one link attempt of the chat and of its sender (`user_id`, Telegram's
    `from.id`). Raises LinkAttemptsLimited, taking none, when either has none left."""
    taken: list[Counter] = []
    for each in _counters(chat_id, user_id):
        if not each.take():
            for held in taken:
                held.give_back()
            retry_after = each.retry_after()
            first = bool(cache.add(_told(each), 1, retry_after))
            raise LinkAttemptsLimited(retry_after=retry_after, first=first)
        taken.append(each)
    return LinkAttempt(counters=tuple(taken))


def link_attempts_spent(*, chat_id: int, user_id: int | None) -> bool:
    """The chat or its sender has no link attempt left and was told so (a read; nothing is
    counted). A cache that does not answer counts as attempts left: the handler counts them."""
    try:
        return bool(cache.get_many([_told(each) for each in _counters(chat_id, user_id)]))
    except Exception as exc:  # the cache (Redis) unreachable: do not lose the update over it
        log.warning("telegram: the link limits could not be read (%s: %s)", type(exc).__name__, exc)
        return False
