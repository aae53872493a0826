"""The models' usage in the admin (`/admin/dashboard/usage/`): its figures by user, group and
model, and their CSV, agree with the records; a bad period is said, not a server error; only staff
who may view the usage records see it; a CSV cell is never a formula."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from usage.models import ModelPrice, UsageRecord
from usage.services import usage_record
from web.admin.usage_report import defused

pytestmark = pytest.mark.django_db

URL = reverse("admin:usage_report")
PERMISSION = "view_usagerecord"


@pytest.fixture
def admin_client_(client, admin_user):
    client.force_login(admin_user)
    return client


def staff(django_user_model, username: str, *codenames: str):
    user = django_user_model.objects.create_user(username, is_staff=True)
    for codename in codenames:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def record(user, model: str, i: int, o: int, *, days_ago: int = 0) -> UsageRecord:
    made = usage_record(user_id=user.pk, model=model, input_tokens=i, output_tokens=o)
    assert made is not None
    if days_ago:
        UsageRecord.objects.filter(pk=made.pk).update(
            created_at=made.created_at - timedelta(days=days_ago)
        )
    return made


@pytest.fixture
def world(alice, bob, django_user_model):
    """Alice in "<b>red</b>", bob in it and in "blue", carol in no group; two priced models and
    one that costs nothing; records of today, of 10 days ago and of 40 days ago."""
    red = Group.objects.create(name="<b>red</b>")
    blue = Group.objects.create(name="blue")
    alice.groups.add(red)
    bob.groups.add(red, blue)
    carol = django_user_model.objects.create_user("carol")
    ModelPrice.objects.create(model="gpt-big", input_per_million=5, output_per_million=15)
    ModelPrice.objects.create(
        model="gpt-small", input_per_million=Decimal("0.15"), output_per_million=Decimal("0.6")
    )
    record(alice, "gpt-big", 1000, 200)
    record(alice, "gpt-small", 30_000, 4000, days_ago=10)
    record(bob, "gpt-big", 7000, 700)
    record(bob, "free-model", 500, 5)
    record(carol, "gpt-small", 12_345, 678, days_ago=3)
    record(carol, "gpt-big", 999_999, 999_999, days_ago=40)  # before the default period
    return {"red": red, "blue": blue, "carol": carol}


def expected(key_of, records) -> dict[str, tuple[int, int, Decimal]]:
    """The figures the page must show, summed in Python from the records."""
    sums: dict[str, list] = defaultdict(lambda: [0, 0, Decimal(0)])
    for r in records:
        for key in key_of(r):
            sums[key][0] += r.input_tokens
            sums[key][1] += r.output_tokens
            sums[key][2] += r.cost
    return {k: (v[0], v[1], v[2]) for k, v in sums.items()}


def groups_of(r: UsageRecord) -> list[str]:
    return [g.name for g in r.user.groups.all()] or ["(no group)"]


KEYS = {
    "user": lambda r: [r.user.username],
    "group": groups_of,
    "model": lambda r: [r.model],
}


def in_last_30_days() -> list[UsageRecord]:
    since = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(
        days=29
    )
    return list(UsageRecord.objects.filter(created_at__gte=since).select_related("user"))


def shown(response, by: str) -> dict[str, tuple[int, int, Decimal]]:
    table = next(t for t in response.context["tables"] if t["table"].by == by)["table"]
    return {r.key: (r.input_tokens, r.output_tokens, r.cost) for r in table.rows}


def read_csv(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(response.content.decode())))


@pytest.mark.parametrize("by", ["user", "group", "model"])
def test_the_figures_of_the_last_30_days_are_the_sums_of_the_records(admin_client_, world, by):
    response = admin_client_.get(URL)

    assert response.status_code == 200
    records = in_last_30_days()
    assert len(records) == 5  # carol's call of 40 days ago is not among them
    assert shown(response, by) == expected(KEYS[by], records)
    assert response.context["calls"] == 5


@pytest.mark.parametrize("by", ["user", "group", "model"])
def test_the_csv_has_a_header_and_the_same_figures(admin_client_, world, by):
    response = admin_client_.get(URL, {"format": "csv", "by": by})

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith(f'attachment; filename="usage-by-{by}-')
    header, *rows = read_csv(response)
    assert header == [by, "input_tokens", "output_tokens", "tokens", "cost"]
    got = {}
    for key, i, o, tokens, cost in rows:
        assert int(tokens) == int(i) + int(o)
        got[key] = (int(i), int(o), Decimal(cost))
    assert got == expected(KEYS[by], in_last_30_days())


def test_the_totals_count_each_call_once(admin_client_, world):
    response = admin_client_.get(URL)
    records = in_last_30_days()
    cost = sum((r.cost for r in records), Decimal(0))
    tokens_in = sum(r.input_tokens for r in records)

    for item in response.context["tables"]:
        total = item["table"].total
        assert (total.input_tokens, total.cost) == (tokens_in, cost), item["table"].by
    # Bob is in two groups: his calls count in each row, and once in the total.
    page = response.content.decode()
    assert f"{tokens_in:,}" in page


def test_a_chosen_period_takes_the_days_it_names_both_included(admin_client_, world):
    today = datetime.now(UTC).date()
    start, end = today - timedelta(days=40), today - timedelta(days=3)

    response = admin_client_.get(URL, {"from": f"{start:%Y-%m-%d}", "to": f"{end:%Y-%m-%d}"})

    assert response.status_code == 200
    assert shown(response, "user") == expected(
        KEYS["user"],
        UsageRecord.objects.filter(created_at__date__range=(start, end)).select_related("user"),
    )
    assert set(shown(response, "user")) == {"alice", "carol"}
    assert shown(response, "user")["carol"][0] == 12_345 + 999_999


def test_the_page_escapes_group_names_and_links_each_csv(admin_client_, world):
    page = admin_client_.get(URL).content.decode()

    assert "&lt;b&gt;red&lt;/b&gt;" in page
    assert "<b>red</b>" not in page
    for by in ("user", "group", "model"):
        assert f"format=csv&amp;by={by}" in page


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"from": "2026-02-30"}, "“from” must be a date written YYYY-MM-DD, like 2026-12-01."),
        ({"to": "yesterday"}, "“to” must be a date written YYYY-MM-DD, like 2026-12-01."),
        ({"from": "<script>"}, "“from” must be a date written YYYY-MM-DD"),
        ({"from": "2025-03-01", "to": "2025-02-01"}, "“from” (2025-03-01) is after “to”"),
        ({"from": "2024-01-01", "to": "2025-01-01"}, "A report covers at most 366 days;"),
        (
            {"from": "0001-01-01", "to": "0001-01-02"},
            "must be a date from 1970-01-01 to 9998-12-31.",
        ),
        (
            {"from": "9999-12-30", "to": "9999-12-31"},
            "must be a date from 1970-01-01 to 9998-12-31.",
        ),
    ],
)
def test_a_bad_period_is_said_on_the_page_and_in_the_csv(admin_client_, world, query, says):
    page = admin_client_.get(URL, query)

    assert page.status_code == 400
    assert says in page.content.decode()
    assert page.context["tables"] is None
    assert "<script>" not in page.content.decode()  # what was typed is given back as text

    spreadsheet = admin_client_.get(URL, {**query, "format": "csv", "by": "user"})
    assert spreadsheet.status_code == 400
    assert spreadsheet["Content-Type"] == "text/plain; charset=utf-8"
    assert says in spreadsheet.content.decode()


def test_366_days_are_allowed(admin_client_, world):
    response = admin_client_.get(URL, {"from": "2024-01-01", "to": "2024-12-31"})

    assert response.status_code == 200
    assert response.context["period"].days == 366


def test_a_bad_table_or_format_is_a_400(admin_client_):
    assert admin_client_.get(URL, {"format": "csv", "by": "session"}).status_code == 400
    assert admin_client_.get(URL, {"format": "csv"}).status_code == 400
    assert admin_client_.get(URL, {"format": "pdf"}).status_code == 400


def test_cells_a_spreadsheet_reads_as_formulas_are_defused(admin_client_, django_user_model):
    names = ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tTAB", "plain", "a=b"]
    for name in names:
        user = django_user_model.objects.create_user(name)
        usage_record(user_id=user.pk, model="=cmd", input_tokens=1, output_tokens=1)

    users = {row[0] for row in read_csv(admin_client_.get(URL, {"format": "csv", "by": "user"}))}
    models = read_csv(admin_client_.get(URL, {"format": "csv", "by": "model"}))

    assert users == {
        "user",
        '\'=HYPERLINK("http://x")',
        "'+1+1",
        "'-2+3",
        "'@SUM(A1)",
        "'\tTAB",
        "plain",
        "a=b",
    }
    assert models[1][0] == "'=cmd"
    assert defused("\rx") == "'\rx"


# --- Who sees it ----------------------------------------------------------------------------------


def test_staff_without_the_permission_are_refused(client, django_user_model, world):
    clerk = staff(django_user_model, "clerk", "view_user")
    client.force_login(clerk)

    assert client.get(URL).status_code == 403
    assert client.get(URL, {"format": "csv", "by": "user"}).status_code == 403
    assert "usage-report-link" not in client.get(reverse("admin:index")).content.decode()


def test_staff_with_the_permission_see_it_linked_from_the_index(client, django_user_model, world):
    reader = staff(django_user_model, "reader", PERMISSION)
    client.force_login(reader)

    assert client.get(URL).status_code == 200
    index = client.get(reverse("admin:index")).content.decode()
    assert f'href="{URL}"' in index
    assert client.post(URL).status_code == 405


def test_the_dashboard_links_it(admin_client_):
    page = admin_client_.get(reverse("admin:dashboard")).content.decode()

    assert f'href="{URL}"' in page


def test_a_user_who_is_not_staff_is_sent_to_log_in(client, bob):
    client.force_login(bob)

    for query in ({}, {"format": "csv", "by": "user"}):
        response = client.get(URL, query)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))
