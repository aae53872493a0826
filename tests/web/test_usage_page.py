"""The usage page (/accounts/usage/): one's own usage and cost by day and by model for a period,
as a chart a screen reader can read and as tables, the total, and the budgets with what is left;
an empty period and a period that cannot be read said plainly on the page."""

from __future__ import annotations

import re
from datetime import UTC, timedelta
from decimal import Decimal
from html import unescape

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from tests.usage.conftest import day, price, record
from usage.models import Budget

pytestmark = pytest.mark.django_db

URL = "/accounts/usage/"


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def december(alice):
    price("big", "10", "30")
    record(alice, "big", 1_000, 100, on=day(2026, 12, 1, 23))
    record(alice, "small", 500, 50, on=day(2026, 12, 1, 1))
    record(alice, "big", 2_000, 200, on=day(2026, 12, 2, 0))
    record(alice, "big", 9_999, 9_999, on=day(2026, 12, 3))  # after the period asked


def _page(client, **query) -> str:
    response = client.get(URL, query)
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def _rows(page: str, testid: str) -> list[list[str]]:
    """The cells' texts of each row marked `testid`."""
    rows = re.findall(rf'<tr[^>]* data-testid="{testid}">(.*?)</tr>', page, re.S)
    return [
        [
            re.sub(r"<[^>]+>", "", c).strip()
            for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
        ]
        for row in rows
    ]


def test_the_period_by_day_and_by_model_with_the_total(as_alice, december):
    page = _page(as_alice, **{"from": "2026-12-01", "to": "2026-12-02"})
    assert "1 Dec 2026 to 2 Dec 2026" in page
    # The total: 3,500 input and 350 output tokens, (3,000 × 10 + 300 × 30) / 1e6 = $0.039.
    assert re.search(r"3,850 tokens</strong> \(3,500 input, 350 output\) · <strong>\$0\.0390", page)
    assert _rows(page, "usage-day-model") == [
        ["1 Dec 2026", "big", "1,000", "100", "$0.0130"],
        ["small", "500", "50", "$0.00"],
        ["2 Dec 2026", "big", "2,000", "200", "$0.0260"],
    ]
    assert _rows(page, "usage-day-total") == [["all models", "1,500", "150", "$0.0130"]]
    assert _rows(page, "usage-model") == [
        ["big", "3,000", "300", "$0.0390"],
        ["small", "500", "50", "$0.00"],
    ]
    assert "9,999" not in page


def test_the_chart_is_read_out_and_its_figures_are_in_a_real_table(as_alice, december):
    page = _page(as_alice, **{"from": "2026-12-01", "to": "2026-12-02"})
    chart = re.search(r'<svg role="img" aria-label="([^"]+)" data-testid="usage-chart"', page)
    assert chart is not None
    assert chart.group(1) == (
        "Tokens per day from 1 Dec 2026 to 2 Dec 2026: 3,850 tokens in all (3,500 input, 350 "
        "output) on 2 days, costing $0.0390; the most, 2,200 tokens, on 2 Dec 2026."
    )
    # A bar per day with usage: input and output, the busiest day full height.
    assert page.count('<rect class="in"') == 2
    assert '<rect class="out" x="11" y="0"' in page
    assert "<caption>Usage by day (UTC)</caption>" in page
    assert "<caption>Usage by model</caption>" in page
    assert '<th scope="col">Day</th>' in page
    assert '<th scope="rowgroup" rowspan="3">1 Dec 2026</th>' in page  # two models and their total
    assert '<th scope="row">big</th>' in page


def test_by_default_the_last_30_days(as_alice, alice):
    now = timezone.now()
    record(alice, "recent", 10, 1, on=now - timedelta(days=29))
    record(alice, "old", 10, 1, on=now - timedelta(days=30))
    page = _page(as_alice)
    today = now.astimezone(UTC).date()
    start = today - timedelta(days=29)
    assert f'name="from" value="{start.isoformat()}"' in page
    assert f'name="to" value="{today.isoformat()}"' in page
    assert [r[0] for r in _rows(page, "usage-model")] == ["recent"]


def test_an_empty_period_says_so(as_alice):
    page = _page(as_alice, **{"from": "2026-01-01", "to": "2026-01-31"})
    assert 'data-testid="usage-empty"' in page
    assert "No usage in this period" in page
    assert "usage-chart" not in page


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ({"from": "yesterday"}, "“from” must be a date written YYYY-MM-DD, like 2026-12-01."),
        ({"to": "2026-02-30"}, "“to” must be a date written YYYY-MM-DD"),
        ({"from": "2026-12-05", "to": "2026-12-01"}, "is after “to”"),
        ({"from": "2024-01-01", "to": "2026-01-01"}, "A report covers at most 366 days"),
        ({"from": "0001-01-01"}, "from 1970-01-01 to 9998-12-31"),
        ({"to": "9999-12-31"}, "from 1970-01-01 to 9998-12-31"),
    ],
)
def test_a_period_that_cannot_be_read_is_said_on_the_page(as_alice, december, query, said):
    response = as_alice.get(URL, query)
    assert response.status_code == 400
    page = response.content.decode()
    error = re.search(r'<p class="notice error" id="usage-error" role="alert"[^>]*>(.*?)</p>', page)
    assert error is not None
    assert said.replace("“", "&ldquo;") in error.group(1) or said in error.group(1)
    assert "No figures are shown." in error.group(1)
    assert 'aria-invalid="true"' in page
    assert "usage-chart" not in page
    assert 'data-testid="usage-period"' in page  # the form, to choose again


def test_bob_never_sees_alices_usage(client, bob, december):
    client.force_login(bob)
    page = _page(client, **{"from": "2026-12-01", "to": "2026-12-02"})
    assert "No usage in this period" in page
    assert "big" not in page
    assert "1,000" not in page


def test_the_budgets_that_bound_you_with_what_is_left(as_alice, alice):
    price("m", "1000", "1000")  # $0.001 a token
    record(alice, "m", 600, 400, on=timezone.now())
    team = Group.objects.create(name="team")
    alice.groups.add(team)
    Budget.objects.create(user=alice, period="day", unit="tokens", limit=Decimal(4_000))
    Budget.objects.create(group=team, period="month", unit="cost", limit=Decimal("1.25"))
    page = _page(as_alice)
    budgets = re.findall(r'<li class="budget[^"]*" data-testid="budget">(.*?)</li>', page, re.S)
    text = [unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", b))).strip() for b in budgets]
    assert text[0].startswith(
        "The group team's monthly budget: $1.00 of $1.25 used, $0.2500 left; renews 1 "
    )
    assert text[1].startswith(
        "Your daily budget: 1,000 tokens of 4,000 tokens used, 3,000 tokens left; renews "
    )
    assert text[0].endswith("00:00 UTC.")
    assert 'value="0.8000" aria-labelledby="budget-1"' in budgets[0]
    assert 'value="0.2500" aria-labelledby="budget-2"' in budgets[1]


def test_no_budget_is_said(as_alice):
    assert "No budget bounds your usage." in _page(as_alice)


def test_the_page_is_linked_from_the_profile_and_the_top_bar(as_alice):
    profile = as_alice.get(reverse("accounts:profile")).content.decode()
    assert f'href="{URL}" data-testid="profile-usage-link"' in profile
    assert f'href="{URL}" class="usage-link" data-testid="usage-link"' in profile


def test_signed_out_it_asks_to_sign_in(client):
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
