"""Admin console for sessions, branches and messages.

Built for big data: every list reads its rows in one query (related rows joined, counts either
denormalised or annotated as correlated subqueries), a branch page shows only the last messages of
its history, and no page loads every user or every message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.messages import ERROR
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from checkpoints.models import Checkpoint
from core.errors import InvalidInput
from core.model_choice import check_model_settings, is_demo
from sessions_app.models import (
    Branch,
    FileVersion,
    Message,
    Session,
    Summary,
    Turn,
    WorkspaceBlob,
)
from sessions_app.search import messages_matching, search_clean
from sessions_app.selectors import branch_history
from sessions_app.services import session_delete, session_update
from web.admin.support import (
    ConversationAdmin,
    JSONFormField,
    OwnerFilter,
    ReadOnlyAdmin,
    ReadOnlyInlineMixin,
    SessionOwnerFilter,
    admin_link,
    changelist_link,
    count_subquery,
    deletion_summary,
    form_metadata,
    form_name,
    form_session_state,
    sum_subquery,
)
from workspace.quota import session_quota

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    from accounts.models import User

RECENT_MESSAGES = 50
PREVIEW_CHARS = 80
TABLE_CONTENT_CHARS = 500


class BranchInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = Branch
    fk_name = "session"
    verbose_name = "branch"
    verbose_name_plural = "branches"
    fields = readonly_fields = (
        "branch_link",
        "is_current",
        "parent",
        "fork_position",
        "message_count",
        "checkpoint_count",
        "created_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Branch]:
        return super().get_queryset(request).select_related("parent")

    @admin.display(description="branch")
    def branch_link(self, obj: Branch) -> str:
        return admin_link(obj, f"branch {obj.pk}") if obj.pk else "-"


class _SessionCounts(TypedDict):
    """What `SessionAdmin.get_queryset` annotates on each session."""

    branch_count: int
    file_versions: int
    file_bytes: int


class SessionForm(forms.ModelForm):
    class Meta:
        model = Session
        fields = ("owner", "session_name", "metadata", "archived_at")
        field_classes: ClassVar[dict[str, type[forms.Field]]] = {"metadata": JSONFormField}

    def clean_session_name(self) -> str:
        return form_name(self.cleaned_data.get("session_name"), "session")

    def clean_metadata(self) -> dict[str, Any]:
        metadata = form_metadata(self.cleaned_data.get("metadata"), "session metadata")
        try:
            check_model_settings(metadata)
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message) from None
        return metadata


@admin.register(Session)
class SessionAdmin(ConversationAdmin):
    form = SessionForm
    list_display = (
        "id",
        "session_name",
        "owner",
        "created_at",
        "updated_at",
        "archived_at",
        "branch_count",
        "workspace_storage",
        "session_key",
    )
    list_select_related = ("owner",)
    list_filter = (
        OwnerFilter,
        ("archived_at", admin.EmptyFieldListFilter),
        ("session_key", admin.EmptyFieldListFilter),
    )
    search_fields = ("session_name", "session_key")
    date_hierarchy = "created_at"
    raw_id_fields = ("owner",)
    # The key is the integration's address for the session: shown, not edited (an edit would
    # leave the integration talking to another session, or to none).
    readonly_fields = (
        "id",
        "session_key",
        "created_at",
        "updated_at",
        "branch_count",
        "workspace_storage",
        "conversation_tree",
    )
    fields = (
        "id",
        "conversation_tree",
        "owner",
        "session_name",
        "session_key",
        "metadata",
        "created_at",
        "updated_at",
        "archived_at",
        "branch_count",
        "workspace_storage",
    )
    inlines = (BranchInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        sessions: QuerySet[Session] = super().get_queryset(request)
        return sessions.annotate(
            branch_count=count_subquery(Branch.objects.all(), "session"),
            file_versions=count_subquery(FileVersion.objects.all(), "branch__session"),
            file_bytes=sum_subquery(WorkspaceBlob.objects.all(), "session", "size"),
        )

    @admin.display(description="branches", ordering="branch_count")
    def branch_count(self, obj: WithAnnotations[Session, _SessionCounts]) -> str:
        return changelist_link(Branch, f"session__id__exact={obj.pk}", obj.branch_count)

    @admin.display(description="workspace", ordering="file_bytes")
    def workspace_storage(self, obj: WithAnnotations[Session, _SessionCounts]) -> str:
        """The bytes of the workspace's distinct contents and its file versions, beside the
        per-session quota (workspace.quota)."""
        quota = session_quota()
        size = filesizeformat(obj.file_bytes)
        if quota.bytes:
            size += f" of {filesizeformat(quota.bytes)}"
        versions = f"{obj.file_versions:,}"
        if quota.versions:
            versions += f" of {quota.versions:,}"
        return f"{size}, {versions} versions"

    @admin.display(description="conversation")
    def conversation_tree(self, obj: Session) -> str:
        """The session as its branch tree, where a checkpoint can be restored for the user
        (web.admin.governance)."""
        if obj.pk is None:
            return "-"
        url = reverse("admin:governance_tree", args=[obj.pk])
        return format_html(
            '<a href="{}" data-testid="conversation-tree-link">Conversation tree</a>', url
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A session is created together with its first branch, by sessions_app.services.
        return False

    def get_readonly_fields(
        self, request: HttpRequest, obj: Session | None = None
    ) -> list[str] | tuple[str, ...]:
        # A session stays with its owner: its turns, keys and history are theirs.
        return [*self.readonly_fields, "owner"] if obj is not None else self.readonly_fields

    def save_model(
        self, request: HttpRequest, obj: Session, form: SessionForm, change: bool
    ) -> None:
        # Through the service, so open tabs and integrations hear of it (session.changed).
        session_update(
            session=obj,
            name=obj.session_name,
            metadata=obj.metadata,
            archived=obj.archived_at is not None,
        )

    def delete_model(self, request: HttpRequest, obj: Session) -> None:
        session_delete(session=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        for session in queryset:
            session_delete(session=session)

    def get_deleted_objects(
        self,
        objs: Sequence[Session] | QuerySet[Session],
        request: HttpRequest,
    ) -> tuple[list[str], dict[str, int], set[str], list[str]]:
        pks = [obj.pk for obj in objs]
        return deletion_summary(request, objs, Session.objects.filter(pk__in=pks))


class CheckpointInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = Checkpoint
    fk_name = "branch"
    fields = readonly_fields = (
        "checkpoint_link",
        "kind",
        "message_count",
        "description",
        "created_at",
    )

    @admin.display(description="checkpoint")
    def checkpoint_link(self, obj: Checkpoint) -> str:
        return admin_link(obj) if obj.pk else "-"

    @admin.display(description="kind")
    def kind(self, obj: Checkpoint) -> str:
        return "automatic" if obj.is_auto else "manual"


class BranchForm(forms.ModelForm):
    class Meta:
        model = Branch
        fields = ("session_state", "metadata")
        field_classes: ClassVar[dict[str, type[forms.Field]]] = {
            "session_state": JSONFormField,
            "metadata": JSONFormField,
        }

    def clean_session_state(self) -> dict[str, Any]:
        return form_session_state(self.cleaned_data.get("session_state"))

    def clean_metadata(self) -> dict[str, Any]:
        return form_metadata(self.cleaned_data.get("metadata"), "branch metadata")


@admin.register(Branch)
class BranchAdmin(ConversationAdmin):
    form = BranchForm

    class Media:
        css: ClassVar[dict[str, list[str]]] = {
            "all": ["rollback/admin.css"]
        }  # no inline style: the Content Security Policy

    list_display = (
        "id",
        "name",
        "session",
        "owner",
        "is_current",
        "parent_link",
        "fork_position",
        "message_count",
        "checkpoint_count",
        "created_at",
    )
    list_select_related = ("session", "session__owner")
    list_filter = ("is_current", SessionOwnerFilter)
    search_fields = ("agno_session_id", "session__session_name")
    # The name is changed where its event is sent: the page, the API (sessions_app.branch_rename).
    readonly_fields = (
        "id",
        "name",
        "session",
        "agno_session_id",
        "parent",
        "fork_position",
        "forked_from",
        "message_count",
        "checkpoint_count",
        "is_current",
        "created_at",
        "recent_messages",
    )
    fieldsets = (
        (
            None,
            {
                "fields": [
                    "id",
                    "name",
                    "session",
                    "agno_session_id",
                    "is_current",
                    "parent",
                    "fork_position",
                    "forked_from",
                    "message_count",
                    "checkpoint_count",
                    "created_at",
                ]
            },
        ),
        ("State", {"fields": ["session_state", "metadata"]}),
        ("Messages", {"fields": ["recent_messages"]}),
    )
    inlines = (CheckpointInline,)

    @admin.display(description="owner", ordering="session__owner")
    def owner(self, obj: Branch) -> User:
        return obj.session.owner

    @admin.display(description="parent", ordering="parent")
    def parent_link(self, obj: Branch) -> str:
        # From parent_id alone: showing the parent object would cost a query per row.
        if obj.parent_id is None:
            return "-"
        url = reverse("admin:sessions_app_branch_change", args=[obj.parent_id])
        return format_html('<a href="{}">branch {}</a>', url, obj.parent_id)

    @admin.display(description=f"last {RECENT_MESSAGES} messages")
    def recent_messages(self, obj: Branch | None) -> str:
        if obj is None or obj.pk is None:
            return "-"
        start = max(0, obj.message_count - RECENT_MESSAGES)
        messages = branch_history(obj, start=start)
        link = changelist_link(
            Message,
            f"branch__id__exact={obj.pk}",
            f"Messages written in this branch ({obj.message_count - obj.fork_position})",
        )
        if not messages:
            return format_html("<p>No messages.</p><p>{}</p>", link)
        rows = format_html_join(
            "\n",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            '<td class="message-content">{}</td><td>{}</td></tr>',
            (
                (
                    message.position,
                    message.role,
                    message.tool_name or "",
                    "this branch" if message.branch_id == obj.pk else f"branch {message.branch_id}",
                    Truncator(message.content).chars(TABLE_CONTENT_CHARS),
                    message.created_at,
                )
                for message in messages
            ),
        )
        return format_html(
            "<p>Messages {} to {} of {} in this branch's history{}. {}</p>"
            "<table><thead><tr><th>position</th><th>role</th><th>tool</th><th>stored in</th>"
            "<th>content</th><th>created</th></tr></thead><tbody>{}</tbody></table>",
            start,
            obj.message_count - 1,
            obj.message_count,
            f" (0 to {obj.fork_position - 1} inherited)" if obj.fork_position else "",
            link,
            rows,
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Branches are made by the services (session create, fork, restore).
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Branch | None = None) -> bool:
        # Deleting a branch would take its child branches along and could leave the session
        # without a current branch; the services never do that. Delete the session instead.
        return False


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
