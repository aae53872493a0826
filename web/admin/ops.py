"""The operator's jobs in the admin: the audit records (read-only, filterable) and buttons that
run a retention rule now or dry. The erasure of users is an action of the users' list
(web.admin.accounts); the schedules are django-celery-beat's "Periodic tasks"."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from ops.models import AuditRecord
from ops.tasks import RULE_TASKS
from web.admin.support import ReadOnlyAdmin

# Who may start a rule from the admin: the permission to add audit records, which only the
# rules themselves do (superusers have it; give it to an operator's group).
RUN_PERMISSION = "ops.add_auditrecord"


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    list_display = (
        "started_at",
        "rule",
        "status",
        "dry_run",
        "by",
        "affected",
        "duration",
        "error_preview",
    )
    list_filter = ("rule", "status", "trigger", "dry_run")
    date_hierarchy = "started_at"
    search_fields = ("target", "actor_name", "schedule", "error")
    show_full_result_count = False
    ordering = ("-started_at", "-id")
    change_list_template = "admin/ops/auditrecord/change_list.html"
    fields = readonly_fields = (
        "rule",
        "target",
        "status",
        "dry_run",
        "by",
        "parameters_shown",
        "affected",
        "details_shown",
        "error",
        "started_at",
        "progress_at",
        "finished_at",
    )

    @admin.display(description="by")
    def by(self, obj: AuditRecord) -> str:
        return obj.by

    @admin.display(description="took")
    def duration(self, obj: AuditRecord) -> str:
        if obj.finished_at is None:
            return "running"
        return f"{(obj.finished_at - obj.started_at).total_seconds():.1f} s"

    @admin.display(description="error")
    def error_preview(self, obj: AuditRecord) -> str:
        return Truncator(obj.error).chars(120)

    @admin.display(description="parameters")
    def parameters_shown(self, obj: AuditRecord) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.parameters, indent=2))

    @admin.display(description="details")
    def details_shown(self, obj: AuditRecord) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.details, indent=2, ensure_ascii=False))

    def get_urls(self) -> list[URLPattern]:
        run = path(
            "run/",
            self.admin_site.admin_view(self.run_view),
            name="ops_auditrecord_run",
        )
        return [run, *super().get_urls()]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {
            **(extra_context or {}),
            "runnable_rules": [(rule, AuditRecord.Rule(rule).label) for rule in RULE_TASKS]
            if request.user.has_perm(RUN_PERMISSION)
            else [],
        }
        return super().changelist_view(request, context)

    def run_view(self, request: HttpRequest) -> HttpResponse:
        """Queue a run of a rule (dry with `dry_run`) for a worker, on behalf of the staff user;
        without Redis it runs here and now."""
        if not request.user.has_perm(RUN_PERMISSION):
            raise PermissionDenied
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        back = HttpResponseRedirect(reverse("admin:ops_auditrecord_changelist"))
        task = RULE_TASKS.get(request.POST.get("rule", ""))  # type: ignore[call-overload]
        if task is None:
            messages.error(request, "Unknown rule: nothing was run.")
            return back
        dry_run = request.POST.get("dry_run") == "1"
        kwargs = {"dry_run": dry_run, "actor": request.user.pk}
        transaction.on_commit(lambda: task.delay(**kwargs))
        messages.success(
            request,
            f"{'A dry run' if dry_run else 'A run'} of “{AuditRecord.Rule(task.name[4:]).label}”"
            " is under way: its record appears here when it finishes.",
        )
        return back
