"""Admin console for messages, turns and summaries: read-only lists, each read in one query."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.conf import settings
from django.contrib import admin
from django.contrib.messages import ERROR
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.text import Truncator

from core.errors import InvalidInput
from core.model_choice import is_demo
from sessions_app.feedback import RATINGS, Feedback, feedback_of
from sessions_app.models import (
    Message,
    MessageQuerySet,
    RatedMessage,
    Summary,
    Turn,
)
from sessions_app.search import messages_matching, search_clean
from web.admin.support import (
    ConversationAdmin,
    OwnerFilter,
    ReadOnlyAdmin,
    admin_link,
)

if TYPE_CHECKING:
    from accounts.models import User

PREVIEW_CHARS = 80
NOTE_PREVIEW_CHARS = 120
MODEL_CHOICES = 50  # the model filter's choices, at most


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


class RatingFilter(admin.SimpleListFilter):
    title = "rating"
    parameter_name = "rating"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        return [("up", "thumbs up"), ("down", "thumbs down")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value in RATINGS:
            return queryset.filter(metadata__feedback__rating=value)
        return queryset


class ReplyModelFilter(admin.SimpleListFilter):
    """The model that wrote the reply (its `metadata.model`), among those of rated replies."""

    title = "model"
    parameter_name = "model"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        found = (
            RatedMessage.objects.rated()
            .order_by()
            .values_list("metadata__model", flat=True)
            .distinct()[:MODEL_CHOICES]
        )
        return [(str(name), str(name)) for name in sorted(n for n in found if n)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(metadata__model=value) if value else queryset


class RatedMessageOwnerFilter(OwnerFilter):
    owner_path = "branch__session__owner"


@admin.register(RatedMessage)
class RatedMessageAdmin(ConversationAdmin, ReadOnlyAdmin):
    """The replies their owners rated, thumbs up or down, with the note, the model that wrote
    the reply, its owner and session: filtered by rating and by model (how each model fares)."""

    list_display = (
        "id",
        "rating",
        "note",
        "reply_model",
        "owner",
        "session",
        "content_preview",
        "created_at",
    )
    list_select_related = ("branch", "branch__session", "branch__session__owner")
    list_filter = (RatingFilter, ReplyModelFilter, RatedMessageOwnerFilter)
    show_full_result_count = False
    ordering = ("-id",)
    fields = readonly_fields = (
        "id",
        "rating",
        "note",
        "reply_model",
        "owner",
        "session",
        "branch",
        "position",
        "content",
        "created_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # The proxy's manager is Message's: its querysets are MessageQuerySets.
        return cast("MessageQuerySet", super().get_queryset(request)).rated()

    def _feedback(self, obj: Message) -> Feedback | None:
        return feedback_of(obj.metadata, obj.role)

    @admin.display(description="rating")
    def rating(self, obj: Message) -> str:
        fb = self._feedback(obj)
        return {"up": "👍 up", "down": "👎 down"}.get(fb["rating"], "") if fb else ""

    @admin.display(description="note")
    def note(self, obj: Message) -> str:
        fb = self._feedback(obj)
        return Truncator(fb["note"]).chars(NOTE_PREVIEW_CHARS) if fb else ""

    @admin.display(description="model")
    def reply_model(self, obj: Message) -> str:
        return str(obj.metadata.get("model", "")) if isinstance(obj.metadata, dict) else ""

    @admin.display(description="user")
    def owner(self, obj: Message) -> User:
        return obj.branch.session.owner

    @admin.display(description="session")
    def session(self, obj: Message) -> str:
        return admin_link(obj.branch.session)

    @admin.display(description="reply")
    def content_preview(self, obj: Message) -> str:
        return Truncator(obj.content).chars(PREVIEW_CHARS)
