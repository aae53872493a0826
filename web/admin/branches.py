"""Admin console for branches: one branch's page shows only the last messages of its history
and its checkpoints, read in a bounded number of queries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from checkpoints.models import Checkpoint
from sessions_app.models import (
    Branch,
    Message,
)
from sessions_app.selectors import branch_history
from web.admin.support import (
    ConversationAdmin,
    JSONFormField,
    ReadOnlyInlineMixin,
    SessionOwnerFilter,
    admin_link,
    changelist_link,
    form_metadata,
    form_session_state,
)

if TYPE_CHECKING:
    from accounts.models import User

RECENT_MESSAGES = 50
TABLE_CONTENT_CHARS = 500


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
