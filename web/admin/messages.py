"""Admin console for messages, turns and summaries: read-only lists, each read in one query."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib import admin
from django.contrib.messages import ERROR
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.text import Truncator

from core.errors import InvalidInput
from core.model_choice import is_demo
from sessions_app.models import (
    Message,
    Summary,
    Turn,
)
from sessions_app.search import messages_matching, search_clean
from web.admin.support import (
    ConversationAdmin,
    OwnerFilter,
    ReadOnlyAdmin,
)

if TYPE_CHECKING:
    from accounts.models import User

PREVIEW_CHARS = 80


class MessageOwnerFilter(OwnerFilter):
    owner_path = "branch__session__owner"


@admin.register(Message)
class MessageAdmin(ConversationAdmin, ReadOnlyAdmin):
    """Messages, searchable by their text through the full-text index (sessions_app/search.py:
    every word, as the start of a word) rather than a substring scan of the whole table, and
    filtered by owner (the user list's "messages" link, or ?owner=<user id>)."""

    list_display = (
        "id",
        "branch",
        "owner",
        "position",
        "role",
        "content_preview",
        "tool_name",
        "created_at",
    )
    list_select_related = ("branch", "branch__session", "branch__session__owner")
    list_filter = ("role", MessageOwnerFilter)
    search_fields = ("content",)
    search_help_text = (
        "Words of the message text, or their beginnings (restor finds restored); every word "
        "must match."
    )
    show_full_result_count = False
    raw_id_fields = ("branch",)
    # branch_id rather than branch: ordering by the relation would sort by the branch's own
    # ordering through a join; (branch_id, position) is the unique index.
    ordering = ("branch_id", "position")

    @admin.display(description="content")
    def content_preview(self, obj: Message) -> str:
        return Truncator(obj.content).chars(PREVIEW_CHARS)

    @admin.display(description="owner")
    def owner(self, obj: Message) -> User:
        return obj.branch.session.owner

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Message], search_term: str
    ) -> tuple[QuerySet[Message], bool]:
        if not search_term.strip():
            return queryset, False
        try:
            query = search_clean(search_term)
        except InvalidInput as exc:
            self.message_user(request, exc.message, ERROR)
            return queryset.none(), False
        return queryset.filter(pk__in=messages_matching(query).values("pk")), False


@admin.register(Turn)
class TurnAdmin(ConversationAdmin, ReadOnlyAdmin):
    """Turns, with what the users never see: the model server's address and the raw errors."""

    list_display = ("id", "session", "status", "finish_reason", "model_used", "created_at")
    list_filter = ("status",)
    list_select_related = ("session",)
    show_full_result_count = False
    raw_id_fields = ("session", "branch", "checkpoint", "rolled_back_to")
    ordering = ("-id",)
    fields = readonly_fields = (
        "id",
        "session",
        "branch",
        "status",
        "finish_reason",
        "message",
        "reply",
        "tools_used",
        "error",
        "model_used",
        "model_server",
        "attempts",
        "created_at",
        "started_at",
        "finished_at",
        "metadata",
    )

    @admin.display(description="model")
    def model_used(self, obj: Turn) -> str:
        return str(obj.metadata.get("model", "")) if isinstance(obj.metadata, dict) else ""

    @admin.display(description="model server")
    def model_server(self, obj: Turn) -> str:
        """Where this deployment's turns go (OPENAI_BASE_URL; never shown to users)."""
        if is_demo():
            return "the offline demo model"
        return settings.OPENAI_BASE_URL or "https://api.openai.com/v1 (OpenAI)"


@admin.register(Summary)
class SummaryAdmin(ConversationAdmin, ReadOnlyAdmin):
    """The model's summaries of long histories (agents.context): one per shared prefix."""

    list_display = ("id", "last_message", "end_position", "model", "created_at")
    list_select_related = ("last_message",)
    show_full_result_count = False
    ordering = ("-id",)
    fields = readonly_fields = (
        "id",
        "last_message",
        "end_position",
        "content",
        "model",
        "created_at",
        "metadata",
    )
