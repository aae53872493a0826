"""Admin console for the effects ledger (sessions_app.models.ledger): the external calls users'
turns made, read-only (the turns write it; only a session's deletion or its user's erasure
removes an entry). Listed per session (the session page links to its entries), filtered by
status, tool and user, searched by tool name. Arguments and results are shown escaped and
bounded; the list reads its rows in one query, newest first, through the (session, id) index
when a session is chosen."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from sessions_app.models import LEDGER_TEXT_LIMIT, Branch, LedgerEntry, Message, Session, Turn
from web.admin.support import (
    ChosenFilter,
    ConversationAdmin,
    OwnerFilter,
    ReadOnlyAdmin,
    admin_link,
)

PREVIEW_CHARS = 80
# The most tool names the tool filter lists (those of the session chosen).
TOOLS_LISTED = 50


def _positive_int(value: str | None) -> int | None:
    try:
        number = int(value or "")
    except ValueError:
        return None
    return number if 0 < number < 2**63 else None


class LedgerUserFilter(OwnerFilter):
    """The user whose turn made the call (the session's owner)."""

    title = "user"
    parameter_name = "user"
    owner_path = "user"


class LedgerSessionFilter(ChosenFilter):
    """One session's entries (the session page's link, or ?session=<id>); lists only the
    session chosen, never every session."""

    title = "session"
    parameter_name = "session"

    def related(self) -> str:
        return "session"

    def label(self, pk: int | None, value: str) -> str:
        session = Session.objects.filter(pk=pk).only("session_name").first() if pk else None
        return session.session_name if session else f"session {value}"


class ToolFilter(admin.SimpleListFilter):
    """By tool name: lists the tools of the session chosen (at most TOOLS_LISTED), or only the
    tool chosen when no session is (a distinct scan of the whole ledger is not made)."""

    title = "tool"
    parameter_name = "tool"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        names: list[str] = []
        session = _positive_int(request.GET.get(LedgerSessionFilter.parameter_name))
        if session is not None:
            names = list(
                LedgerEntry.objects.filter(session_id=session)
                .order_by("tool_name")
                .values_list("tool_name", flat=True)
                .distinct()[:TOOLS_LISTED]
            )
        value = self.value()
        if value is not None and value not in names:
            names.append(value)
        return [(name, name) for name in names]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset if value is None else queryset.filter(tool_name=value)


def _text(value: Any) -> str:
    """A tool call's arguments (any JSON) or result as text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


def _block(value: Any) -> str:
    text = Truncator(_text(value)).chars(LEDGER_TEXT_LIMIT)
    return format_html('<pre class="ledger-text">{}</pre>', text) if text else "-"


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ConversationAdmin, ReadOnlyAdmin):
    """The effects ledger: nothing here adds, changes or deletes an entry."""

    list_display = (
        "id",
        "created_at",
        "session",
        "user",
        "tool_name",
        "status",
        "args_preview",
        "result_preview",
        "branch_ref",
        "turn_ref",
    )
    list_select_related = ("session", "user")
    list_filter = ("status", ToolFilter, LedgerUserFilter, LedgerSessionFilter)
    search_fields = ("tool_name",)
    search_help_text = "Part of a tool's name (time__convert_time, send_message)."
    show_full_result_count = False
    ordering = ("-id",)
    fields = readonly_fields = (
        "id",
        "session",
        "user",
        "created_at",
        "status",
        "tool_name",
        "branch_link",
        "turn_link",
        "message_link",
        "position",
        "arguments",
        "result",
    )

    @admin.display(description="arguments")
    def args_preview(self, obj: LedgerEntry) -> str:
        return Truncator(_text(obj.tool_args)).chars(PREVIEW_CHARS)

    @admin.display(description="result")
    def result_preview(self, obj: LedgerEntry) -> str:
        return Truncator(obj.tool_result).chars(PREVIEW_CHARS)

    @admin.display(description="arguments")
    def arguments(self, obj: LedgerEntry) -> str:
        return _block(obj.tool_args)

    @admin.display(description="result")
    def result(self, obj: LedgerEntry) -> str:
        return _block(obj.tool_result)

    @admin.display(description="branch")
    def branch_link(self, obj: LedgerEntry) -> str:
        return _kept(Branch.objects.filter(session_id=obj.session_id), obj.branch_ref, "branch")

    @admin.display(description="turn")
    def turn_link(self, obj: LedgerEntry) -> str:
        return _kept(Turn.objects.filter(session_id=obj.session_id), obj.turn_ref, "turn")

    @admin.display(description="tool message")
    def message_link(self, obj: LedgerEntry) -> str:
        messages = Message.objects.filter(branch__session_id=obj.session_id)
        return _kept(messages, obj.message_ref, "message")


def _kept(rows: QuerySet[Any], pk: int | None, what: str) -> str:
    """A link to the row the entry names when it is still there; else what became of it."""
    if pk is None:
        return "-"
    found = rows.filter(pk=pk).first()
    if found is None:
        return f"{what} {pk} (deleted since)"
    return admin_link(found, f"{what} {pk}")


def ledger_link(session: Session) -> str:
    """The session page's link to its entries, with their count (one index range)."""
    count = LedgerEntry.objects.filter(session=session).count()
    url = reverse("admin:sessions_app_ledgerentry_changelist")
    return format_html(
        '<a href="{}?{}={}" data-testid="effects-ledger-link">{} entr{}</a>',
        url,
        LedgerSessionFilter.parameter_name,
        session.pk,
        count,
        "y" if count == 1 else "ies",
    )
