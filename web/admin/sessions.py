"""Admin console for sessions, branches and messages.

Built for big data: every list reads its rows in one query (related rows joined, counts either
denormalised or annotated as correlated subqueries), a branch page shows only the last messages of
its history, and no page loads every user or every message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.html import format_html

from core.errors import InvalidInput
from core.model_choice import check_model_settings
from sessions_app.models import Branch, Session
from sessions_app.services import session_delete, session_update
from web.admin.ledger import ledger_link
from web.admin.support import (
    ConversationAdmin,
    JSONFormField,
    OwnerFilter,
    ReadOnlyInlineMixin,
    admin_link,
    changelist_link,
    count_subquery,
    deletion_summary,
    form_metadata,
    form_name,
    sum_subquery,
)
from workspace.models import FileVersion, WorkspaceBlob
from workspace.quota import session_quota

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


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
        "effects_ledger",
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
        "effects_ledger",
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

    @admin.display(description="effects ledger")
    def effects_ledger(self, obj: Session) -> str:
        """The external calls the session's turns made (web.admin.ledger), whatever was rewound
        or deleted since."""
        return ledger_link(obj) if obj.pk is not None else "-"

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
