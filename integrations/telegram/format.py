"""Text for Telegram: Markdown (the model's, untrusted) into Telegram's text and entities, split
into messages of at most 4,096 UTF-16 code units.

telegramify-markdown does the conversion (`convert`: plain text plus MessageEntity offsets in
UTF-16 units, so nothing needs escaping) and the splitting (`split_entities`: at a newline when
one fits, entities clipped into both halves). On top of it: links keep only the schemes
Telegram should open (http, https, tg; any other link loses its URL and keeps its text), an empty
reply becomes a placeholder, and Markdown the converter cannot handle is sent as it is.
A reply still streaming is plain text (half a Markdown construct would render wrongly), split
by the same rule.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import telegram
import telegramify_markdown
from telegramify_markdown import MessageEntity

__all__ = ["EMPTY_REPLY", "MAX_MESSAGE", "Piece", "render", "split_plain", "utf16_len"]

log = logging.getLogger(__name__)

MAX_MESSAGE = 4096  # UTF-16 code units of one message's text
EMPTY_REPLY = "(empty reply)"
SAFE_SCHEMES = frozenset({"http", "https", "tg"})

utf16_len = telegramify_markdown.utf16_len


@dataclass(frozen=True)
class Piece:
    """The text of one Telegram message and its entities (offsets in UTF-16 code units)."""

    text: str
    entities: tuple[MessageEntity, ...] = field(default=())

    def telegram_entities(self) -> list[telegram.MessageEntity]:
        """The entities as python-telegram-bot's objects, for sendMessage/editMessageText."""
        return [
            telegram.MessageEntity(
                type=e.type,
                offset=e.offset,
                length=e.length,
                url=e.url,
                language=e.language,
                custom_emoji_id=e.custom_emoji_id,
            )
            for e in self.entities
        ]

    def entity_dicts(self) -> list[dict[str, object]]:
        """The entities as the Bot API's JSON (what Telegram stores with the message)."""
        return [e.to_dict() for e in self.entities]


def _safe(entity: MessageEntity) -> MessageEntity | None:
    """The entity as sent: a link to an unsafe scheme is dropped (its text stays), and so are
    entities that name users or custom emoji (the model cannot mean them)."""
    if entity.type in ("mention_name", "text_mention", "custom_emoji"):
        return None
    if entity.url is None:
        return entity
    try:
        scheme = urlsplit(entity.url.strip()).scheme.lower()
    except ValueError:  # "http://[" and the like: no link to open
        return None
    return entity if scheme in SAFE_SCHEMES else None


def render(markdown: str) -> list[Piece]:
    """Markdown as Telegram messages (text and entities), each at most 4,096 UTF-16 units;
    at least one message (a placeholder for an empty reply)."""
    try:
        text, entities = telegramify_markdown.convert(markdown)
    except Exception:  # the model's Markdown is untrusted input: never fail the delivery on it
        log.warning("telegram: could not convert a reply's Markdown; sending it as text")
        return split_plain(markdown) or [Piece(EMPTY_REPLY)]
    kept = [e for e in (_safe(e) for e in entities) if e is not None]
    pieces = [
        Piece(chunk, tuple(chunk_entities))
        for chunk, chunk_entities in telegramify_markdown.split_entities(text, kept, MAX_MESSAGE)
    ]
    return pieces or [Piece(EMPTY_REPLY)]


def split_plain(text: str) -> list[Piece]:
    """Plain text (no entities) as messages of at most 4,096 UTF-16 units; none when blank."""
    return [Piece(chunk) for chunk, _ in telegramify_markdown.split_entities(text, [], MAX_MESSAGE)]
