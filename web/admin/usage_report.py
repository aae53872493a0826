"""The usage of the models over a period (`/admin/dashboard/usage/`, a page of the admin site in
web.admin_site, linked from the index and the operator's dashboard): input and output tokens and
cost by user, by group and by model, with the totals, and each table as CSV
(`?format=csv&by=user|group|model`).

Who: staff who may view the usage records (usage.view_usagerecord, as their list in the admin);
others are refused (403).

The period is a GET form of two dates, `from` and `to`, read as the users' usage page and the API
read them (usage.periods: UTC days, both included; the last 30 days by default; at most 366); a
bad one is said on the page, or as the CSV's text, with a 400, never a server error. The figures
are usage.selectors'.

The CSV holds values, never formulas: a cell that a spreadsheet would read as one (it starts
with = + - @, a tab or a carriage return: a username can) is prefixed with an apostrophe."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.template.response import TemplateResponse

from core.errors import InvalidInput
from usage.models import Budget, UsageRecord, amount_shown
from usage.periods import DEFAULT_DAYS, MAX_DAYS, Period, period_parse, today
from usage.selectors import Row, Totals, by_group, by_model, by_user, in_period, sum_rows, totals
from usage.services import COST_PLACES

if TYPE_CHECKING:
    from django.contrib.admin import AdminSite
    from django.contrib.auth.models import AnonymousUser

    from accounts.models import User

PERMISSION = "usage.view_usagerecord"
# What a spreadsheet would take for the start of a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def may_see(user: User | AnonymousUser) -> bool:
    return bool(user.is_active and user.is_staff and user.has_perm(PERMISSION))


@dataclass(frozen=True)
class Table:
    """One of the page's tables: its rows (the most costly first) and the totals beneath."""

    by: str
    title: str
    heading: str
    rows: list[Row]
    total: Totals
    note: str = ""


def _costliest_first(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (-r.cost, -r.tokens, r.key))


TABLES: dict[str, tuple[str, str, Callable[[QuerySet[UsageRecord]], list[Row]]]] = {
    "user": ("By user", "User", by_user),
    "group": ("By group", "Group", by_group),
    "model": ("By model", "Model", by_model),
}


def table(by: str, records: QuerySet[UsageRecord], everything: Totals) -> Table:
    title, heading, read = TABLES[by]
    rows = _costliest_first(read(records))
    if by == "group":
        # A member of two groups counts in both: the rows may add up to more than everything.
        note = "A member of several groups counts in each; the totals count each call once."
        return Table(by, title, heading, rows, everything, note)
    return Table(by, title, heading, rows, sum_rows(rows))


# --- CSV ------------------------------------------------------------------------------------------


def exact(cost: Decimal) -> str:
    """A cost to the billionth, as it is kept (a database's sum may carry more places)."""
    return f"{cost.quantize(COST_PLACES):f}"


def defused(text: str) -> str:
    """A cell's text that no spreadsheet reads as a formula."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def csv_response(by: str, rows: list[Row], start: date, end: date) -> HttpResponse:
    """The rows as CSV, with a header row and no totals row (values only)."""
    name = f"usage-by-{by}-{start:%Y-%m-%d}-to-{end:%Y-%m-%d}.csv"
    response = HttpResponse(
        content_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
    writer = csv.writer(response)
    writer.writerow([by, "input_tokens", "output_tokens", "tokens", "cost"])
    for row in rows:
        writer.writerow(
            [defused(row.key), row.input_tokens, row.output_tokens, row.tokens, exact(row.cost)]
        )
    return response


# --- The page -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """A row as the page shows it."""

    key: str
    input_tokens: str
    output_tokens: str
    cost: str
    exact_cost: str


def shown(key: str, figures: Row | Totals) -> Shown:
    return Shown(
        key,
        f"{figures.input_tokens:,}",
        f"{figures.output_tokens:,}",
        amount_shown(figures.cost, Budget.Unit.COST),
        exact(figures.cost),
    )


def usage_report(request: HttpRequest, *, site: AdminSite) -> HttpResponse:
    if not may_see(request.user):
        raise PermissionDenied
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    wanted = request.GET.get("format", "")
    if wanted not in ("", "html", "csv"):
        return _bad("format is csv, or none for the page.")
    by = request.GET.get("by", "")
    if wanted == "csv" and by not in TABLES:
        return _bad("by is user, group or model.")
    raw_from, raw_to = request.GET.get("from", ""), request.GET.get("to", "")
    try:
        period = period_parse(raw_from, raw_to)
    except InvalidInput as exc:
        if wanted == "csv":
            return _bad(exc.people)
        return _page(request, site, {"raw_from": raw_from, "raw_to": raw_to, "error": exc.people})
    records = in_period(UsageRecord.objects.all(), period.start, period.end)
    if wanted == "csv":
        read = TABLES[by][2]
        return csv_response(by, _costliest_first(read(records)), period.start, period.end)
    return _page(request, site, _figures(period, records))


def _figures(period: Period, records: QuerySet[UsageRecord]) -> dict[str, Any]:
    """The page's tables, each with its CSV's address."""
    everything = totals(records)
    dates = {"from": period.start.isoformat(), "to": period.end.isoformat()}
    tables = [table(name, records, everything) for name in TABLES]
    return {
        "raw_from": dates["from"],
        "raw_to": dates["to"],
        "period": period,
        "calls": everything.calls,
        "tables": [
            {
                "table": t,
                "rows": [shown(r.key, r) for r in t.rows],
                "total": shown("Total", t.total),
                "csv": "?" + urlencode({**dates, "format": "csv", "by": t.by}),
            }
            for t in tables
        ],
    }


def _page(request: HttpRequest, site: AdminSite, figures: dict[str, Any]) -> HttpResponse:
    context: dict[str, Any] = {
        **site.each_context(request),
        "title": "Model usage",
        "today": today(),
        "default_days": DEFAULT_DAYS,
        "max_days": MAX_DAYS,
        "tables": None,
        **figures,
    }
    request.current_app = site.name
    status = 400 if "error" in figures else 200
    return TemplateResponse(request, "admin/usage_report.html", context, status=status)


def _bad(said: str) -> HttpResponse:
    return HttpResponse(said, status=400, content_type="text/plain; charset=utf-8")
