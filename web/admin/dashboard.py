"""The operator's dashboard (`/admin/dashboard/`, a page of the admin site in web.admin_site): the
site's totals, the users by storage, the newest failed turns and the newest audit records.

Who sees what: a section is shown to staff who may view, in the admin, every model whose rows it
shows (a superuser may view them all), and the failed turns (conversation data) only to those
who also hold governance.govern_conversations; staff who may see no section are refused (403),
and the admin's index links the page only for those who may see some of it. The reads are
ops.selectors'; only the sections shown are read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse

from governance.models import GOVERN_PERMISSION
from ops.selectors import (
    NEWEST,
    USAGE_CACHE_SECONDS,
    USERS_PER_PAGE,
    newest_audit_records,
    newest_failed_turns,
    usage,
)

if TYPE_CHECKING:
    from django.contrib.admin import AdminSite
    from django.contrib.auth.models import AnonymousUser

    from accounts.models import User

# Section -> the view permissions it needs: every model whose rows (or counts of them) it shows.
SECTIONS: dict[str, tuple[str, ...]] = {
    # The totals, and each user with their sessions, messages and storage (messages, checkpoints,
    # their workspaces' file versions and contents).
    "usage": (
        "accounts.view_user",
        "sessions_app.view_session",
        "sessions_app.view_message",
        "checkpoints.view_checkpoint",
        "workspace.view_fileversion",
        "workspace.view_workspaceblob",
    ),
    # Each failed turn's error, with its session and the session's owner: conversation data,
    # for those who may see users' conversations (governance) only.
    "failed_turns": (
        "sessions_app.view_turn",
        "sessions_app.view_session",
        "accounts.view_user",
        GOVERN_PERMISSION,
    ),
    "audit": ("ops.view_auditrecord",),
}
# The highest page number taken as one (half a million users); anything above is junk in the
# address, answered with the first page.
MAX_PAGE = 10_000


def visible_sections(user: User | AnonymousUser) -> frozenset[str]:
    """The sections `user` may see: none for anyone who is not active staff."""
    if not (user.is_active and user.is_staff):
        return frozenset()
    return frozenset(name for name, perms in SECTIONS.items() if user.has_perms(perms))


def page_number(value: str | None) -> int:
    """The users' page asked for; the first for anything that is not a page number."""
    try:
        number = int(value or 1)
    except ValueError:
        return 1
    return number if 1 <= number <= MAX_PAGE else 1


def _url(name: str) -> str:
    """The address of an admin page, or "" while it does not exist (the audit records' list is
    registered by the ops rules' own admin)."""
    try:
        return reverse(name)
    except NoReverseMatch:
        return ""


def dashboard(request: HttpRequest, *, site: AdminSite) -> HttpResponse:
    sections = visible_sections(request.user)
    if not sections:
        raise PermissionDenied
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    context: dict[str, Any] = {
        **site.each_context(request),
        "title": "Operator's dashboard",
        "sections": sections,
        "newest": NEWEST,
    }
    if "usage" in sections:
        figures = usage(page=page_number(request.GET.get("page")))
        context.update(
            usage=figures,
            users_per_page=USERS_PER_PAGE,
            cache_seconds=USAGE_CACHE_SECONDS,
            users_url=reverse("admin:accounts_user_changelist", current_app=site.name),
        )
    if "failed_turns" in sections:
        context.update(
            failed_turns=newest_failed_turns(),
            turns_url=reverse("admin:sessions_app_turn_changelist", current_app=site.name)
            + "?status__exact=failed",
        )
    if "audit" in sections:
        context.update(
            audit_records=newest_audit_records(),
            audit_url=_url("admin:ops_auditrecord_changelist"),
        )
    request.current_app = site.name
    return TemplateResponse(request, "admin/operator_dashboard.html", context)
