"""Reads of the integrations, starting from the user."""

from __future__ import annotations

from django.db.models import QuerySet

from accounts.models import User

from .models import TelegramChat


def telegram_chats_for_user(user: User) -> QuerySet[TelegramChat]:
    """The Telegram chats linked to the user, the latest linked first."""
    return TelegramChat.objects.filter(user=user).order_by("-linked_at", "-pk")
