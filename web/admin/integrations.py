"""The admin of the Telegram bridge: the linked chats (a chat is linked by its user with
`/start CODE`, never here; deleting one unlinks it)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from integrations.models import TelegramChat


@admin.register(TelegramChat)
class TelegramChatAdmin(admin.ModelAdmin):
    list_display = ("chat_id", "user", "title", "linked_at")
    list_select_related = ("user",)
    search_fields = ("user__username", "title", "=chat_id")
    readonly_fields = ("chat_id", "user", "title", "linked_at")
    ordering = ("-linked_at", "-pk")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
