"""The account's usage page (/accounts/usage/?from=&to=): the signed-in user's own usage and cost
by day and by model over a period (the last 30 days unless chosen), as a chart and a table, and
what is left of each budget that bounds them. A period that cannot be read is said on the page
(400), never a failure."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from accounts.models import User
from core.errors import InvalidInput
from usage.periods import DEFAULT_DAYS, MAX_DAYS, period_parse, today
from usage.selectors import budget_states, usage_report
from web.usage_chart import day_chart


def _user(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User):  # login_required lets only users in
        raise PermissionDenied
    return user


@login_required
@require_GET
@never_cache
def usage_page(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    raw_from, raw_to = request.GET.get("from", ""), request.GET.get("to", "")
    context = {
        "raw_from": raw_from,
        "raw_to": raw_to,
        "today": today(),
        "default_days": DEFAULT_DAYS,
        "max_days": MAX_DAYS,
        "budgets": budget_states(user),
    }
    try:
        period = period_parse(raw_from, raw_to)
    except InvalidInput as exc:
        context["error"] = exc.people
        return render(request, "accounts/usage.html", context, status=400)
    report = usage_report(user, period.start, period.end)
    context.update(
        raw_from=period.start.isoformat(),
        raw_to=period.end.isoformat(),
        period=period,
        report=report,
        chart=day_chart(period, report),
    )
    return render(request, "accounts/usage.html", context)
