"""The admin's login page, under the same sign-in limits as the login page: the limits'
refusal is shown on the form and answered with 429."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.http import HttpRequest, HttpResponse

from web.signin import LimitedAuthenticationForm, lockout_status


class AdminLoginForm(LimitedAuthenticationForm, AdminAuthenticationForm):
    pass


admin.site.login_form = AdminLoginForm


def login(request: HttpRequest) -> HttpResponse:
    """The admin site's own login view, with 429 for a refused sign-in (rollback_site/urls.py
    routes /admin/login/ here)."""
    response = admin.site.login(request)
    context = getattr(response, "context_data", None) or {}
    return lockout_status(response, context.get("form"))
