"""Linking a Telegram chat to a user: a one-time code made on the profile page or by the API,
sent to the bot as `/start CODE`; unlinking from the profile page."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from accounts.models import User
from integrations.models import TelegramChat, TelegramLinkCode

from . import client
from .errors import (
    BridgeOff,
    ChatNotFound,
    LinkCodeExpired,
    LinkCodeUnknown,
    LinkCodeUsed,
    UserDeactivated,
)

# No 0/O, 1/I/L: a code read on one screen and typed on another.
ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_LIFETIME = timedelta(minutes=10)
TITLE_MAX_LENGTH = 200


@dataclass(frozen=True)
class LinkCode:
    code: str
    expires_at: datetime


def normalise_code(code: str) -> str:
    """What the user typed, as stored: upper case, no spaces or dashes around or inside."""
    return "".join(code.split()).replace("-", "").upper()


def code_hash(code: str) -> str:
    return hashlib.sha256(normalise_code(code).encode()).hexdigest()


def link_code_create(*, user: User) -> LinkCode:
    """A new one-time code for `user`, valid ten minutes; the user's earlier unused codes are
    retired (marked used), so only the newest one links. Only its SHA-256 is stored. Refused
    (BridgeOff) while the bridge is off: no bot could take the code."""
    if not client.enabled():
        raise BridgeOff()
    if not user.is_active:
        raise UserDeactivated()
    code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
    now = timezone.now()
    with transaction.atomic():
        TelegramLinkCode.objects.filter(user=user, used_at__isnull=True).update(used_at=now)
        row = TelegramLinkCode.objects.create(
            user=user, code_hash=code_hash(code), created_at=now, expires_at=now + CODE_LIFETIME
        )
    return LinkCode(code=code, expires_at=row.expires_at)


def link_code_consume(*, code: str, chat_id: int, title: str) -> TelegramChat:
    """Link the chat to the code's user and use the code up. The code is claimed by a
    conditional update (`used_at` still empty), so of two `/start` with one code, one links and
    the other is told the code was used. A chat linked to someone else moves to this user."""
    now = timezone.now()
    with transaction.atomic():
        row = (
            TelegramLinkCode.objects.select_related("user")
            .filter(code_hash=code_hash(code))
            .first()
        )
        if row is None:
            raise LinkCodeUnknown()
        if row.used_at is not None:
            raise LinkCodeUsed()
        if row.expires_at <= now:
            raise LinkCodeExpired()
        if not row.user.is_active:
            raise UserDeactivated()
        claimed = TelegramLinkCode.objects.filter(pk=row.pk, used_at__isnull=True).update(
            used_at=now
        )
        if claimed != 1:
            raise LinkCodeUsed()
        chat, _ = TelegramChat.objects.update_or_create(
            chat_id=chat_id,
            defaults={"user": row.user, "title": title[:TITLE_MAX_LENGTH], "linked_at": now},
        )
    return chat


def chat_unlink(*, user: User, chat_pk: int) -> None:
    """Unlink one of the user's chats (another user's, or none, is ChatNotFound). The chat's
    conversation stays in the web app; the chat is told how to link again when it next writes."""
    deleted, _ = TelegramChat.objects.filter(user=user, pk=chat_pk).delete()
    if not deleted:
        raise ChatNotFound()
