"""The Telegram bridge's rows: one-time link codes, linked chats, the updates seen (each handled
once, whatever Telegram redelivers) and the messages that show a turn's reply in a chat."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone


class TelegramLinkCode(models.Model):
    """A one-time code that links a Telegram chat to its user (`/start CODE`): single use, valid
    for ten minutes. Only the code's SHA-256 is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="telegram_link_codes"
    )
    code_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "Telegram link code"

    def __str__(self) -> str:
        return f"link code of user {self.user_id}"


class TelegramChat(models.Model):
    """A Telegram chat linked to a user: its messages are turns of that user's session of key
    `agent:telegram:per-peer:<chat_id>`. A chat belongs to one user at a time."""

    chat_id = models.BigIntegerField(unique=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="telegram_chats"
    )
    # How the chat names itself (@username or first name), for the profile's list; bounded.
    title = models.CharField(max_length=200, blank=True, default="")
    linked_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "linked Telegram chat"
        ordering = ("-linked_at", "-pk")

    def __str__(self) -> str:
        return f"Telegram chat {self.chat_id}"


class TelegramUpdate(models.Model):
    """An update Telegram delivered, by its `update_id`: a redelivered one finds its row and is
    not handled again. `payload` is the update as received (bounded by the webhook), for the
    worker that handles it. A handler (the task, or the periodic sweep for an update no task
    took) claims it by a conditional update of `claimed_at` and `attempts`; `handled_at` is set
    when its handling ended (or was given up). A claim that never ended (its process died) is
    taken again once stale, up to TELEGRAM_UPDATE_ATTEMPTS claims in all."""

    update_id = models.BigIntegerField(primary_key=True)
    payload = models.JSONField(default=dict)
    received_at = models.DateTimeField(default=timezone.now, db_index=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    handled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "Telegram update"
        indexes: ClassVar[list[models.Index]] = [
            # The sweep's question: the updates not handled yet (few, among days of handled ones).
            models.Index(
                fields=["received_at"],
                condition=models.Q(handled_at__isnull=True),
                name="telegram_update_unhandled",
            ),
        ]

    def __str__(self) -> str:
        return f"Telegram update {self.update_id}"


class TelegramReply(models.Model):
    """The Telegram messages that show one turn's reply, in order: the first is sent when the
    reply starts and edited as it streams; a reply over 4,096 characters continues in more.
    `delivered_at` is set (by a conditional update) by the process that sent its final form."""

    turn = models.OneToOneField(
        "sessions_app.Turn",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="telegram_reply",
    )
    chat_id = models.BigIntegerField()
    message_ids = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "Telegram reply"

    def __str__(self) -> str:
        return f"Telegram reply to turn {self.turn_id}"
