"""The console's admin site: Django's own, with the operator's dashboard (`/admin/dashboard/`,
web.admin.dashboard) and the models' usage (`/admin/dashboard/usage/`, web.admin.usage_report)
among its pages and linked from its index. `RollbackAdminConfig` takes
django.contrib.admin's place in INSTALLED_APPS, so `admin.site` is this site.

It lives outside web.admin on purpose, and reaches the dashboard through imports inside its
methods: importing web.admin registers the models on `admin.site`, which creates this site on
first use, so the site's module cannot import web.admin while it is being imported itself."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver, path, reverse


class RollbackAdminSite(admin.AdminSite):
    def get_urls(self) -> list[URLResolver | URLPattern]:
        # Before Django's own, whose last pattern catches every other address.
        return [
            path("dashboard/", self.admin_view(self.dashboard), name="dashboard"),
            path("dashboard/usage/", self.admin_view(self.usage_report), name="usage_report"),
            path(
                "conversations/<int:pk>/tree/",
                self.admin_view(self.conversation_tree),
                name="governance_tree",
            ),
            *super().get_urls(),
        ]

    def dashboard(self, request: HttpRequest) -> HttpResponse:
        from web.admin import dashboard  # see the module's docstring

        return dashboard.dashboard(request, site=self)

    def usage_report(self, request: HttpRequest) -> HttpResponse:
        from web.admin import usage_report  # see the module's docstring

        return usage_report.usage_report(request, site=self)

    def conversation_tree(self, request: HttpRequest, pk: int) -> HttpResponse:
        from web.admin import governance  # see the module's docstring

        return governance.tree_view(request, pk, site=self)

    def each_context(self, request: HttpRequest) -> dict[str, Any]:
        from web.admin import dashboard, usage_report  # see the module's docstring

        context = super().each_context(request)
        # The index links the dashboard for those who may see some of it.
        shown = dashboard.visible_sections(request.user)
        context["dashboard_url"] = (
            reverse("admin:dashboard", current_app=self.name) if shown else ""
        )
        # And the models' usage for those who may see it.
        context["usage_report_url"] = (
            reverse("admin:usage_report", current_app=self.name)
            if usage_report.may_see(request.user)
            else ""
        )
        return context

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        """The index, saying whether the agent's sandboxed shell works here (and why not)."""
        from sandbox.availability import availability

        return super().index(request, {**(extra_context or {}), "sandbox": availability()})


class RollbackAdminConfig(AdminConfig):
    default_site = "web.admin_site.RollbackAdminSite"
