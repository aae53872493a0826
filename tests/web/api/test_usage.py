"""GET /api/v1/usage/?from=&to=: your own usage per day and per model, the total, and your budgets
(the most used as `budget`), in the contract's shape; bad periods are a 400 saying why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from tests.usage.conftest import day, price, record
from usage.models import Budget

pytestmark = pytest.mark.django_db

URL = "/api/v1/usage/"


def test_the_period_s_usage_by_day_and_model_with_the_total(api, alice):
    price("big", "10", "30")
    record(alice, "big", 1_000, 100, on=day(2026, 12, 1, 23))
    record(alice, "small", 500, 50, on=day(2026, 12, 1, 1))
    record(alice, "big", 2_000, 200, on=day(2026, 12, 2, 0))
    record(alice, "big", 9_999, 9_999, on=day(2026, 12, 3))  # after the period
    response = api.get(URL, {"from": "2026-12-01", "to": "2026-12-02"})
    assert response.status_code == 200
    assert response.json() == {
        "from": "2026-12-01",
        "to": "2026-12-02",
        "days": [
            {
                "date": "2026-12-01",
                "input_tokens": 1_500,
                "output_tokens": 150,
                "cost": 0.013,
                "models": [
                    {"model": "big", "input_tokens": 1_000, "output_tokens": 100, "cost": 0.013},
                    {"model": "small", "input_tokens": 500, "output_tokens": 50, "cost": 0.0},
                ],
            },
            {
                "date": "2026-12-02",
                "input_tokens": 2_000,
                "output_tokens": 200,
                "cost": 0.026,
                "models": [
                    {"model": "big", "input_tokens": 2_000, "output_tokens": 200, "cost": 0.026}
                ],
            },
        ],
        "models": [
            {"model": "big", "input_tokens": 3_000, "output_tokens": 300, "cost": 0.039},
            {"model": "small", "input_tokens": 500, "output_tokens": 50, "cost": 0.0},
        ],
        "total": {"input_tokens": 3_500, "output_tokens": 350, "cost": 0.039},
        "budget": None,
        "budgets": [],
    }


def test_by_default_the_last_30_days_to_today(api, alice):
    now = timezone.now()
    record(alice, "m", 10, 1, on=now)
    record(alice, "m", 20, 2, on=now - timedelta(days=29))
    record(alice, "m", 40, 4, on=now - timedelta(days=30))  # a day too early
    body = api.get(URL).json()
    today = now.astimezone(UTC).date()
    assert (body["from"], body["to"]) == ((today - timedelta(days=29)).isoformat(), str(today))
    assert body["total"] == {"input_tokens": 30, "output_tokens": 3, "cost": 0.0}
    assert len(body["days"]) == 2


def test_cost_is_a_number_rounded_to_six_places(api, alice):
    price("cheap", "0.123456", "0")
    record(alice, "cheap", 7, 0, on=timezone.now())  # 0.000000864192, kept as 0.000000864
    record(alice, "cheap", 9, 0, on=timezone.now())
    body = api.get(URL).json()
    assert body["total"]["cost"] == 0.000002  # 0.000001975 rounded
    assert isinstance(body["models"][0]["cost"], float)


def test_an_empty_period_has_no_days_and_zero_totals(api):
    body = api.get(URL, {"from": "2026-01-01", "to": "2026-01-31"}).json()
    assert body["days"] == []
    assert body["models"] == []
    assert body["total"] == {"input_tokens": 0, "output_tokens": 0, "cost": 0.0}


def test_the_budgets_that_bound_you_the_most_used_first(api, alice):
    now = timezone.now()
    price("m", "1000", "1000")  # $0.001 a token
    record(alice, "m", 600, 400, on=now)  # 1,000 tokens, $1.00
    team = Group.objects.create(name="team")
    alice.groups.add(team)
    Budget.objects.create(user=alice, period="day", unit="tokens", limit=Decimal(4_000))
    Budget.objects.create(group=team, period="month", unit="cost", limit=Decimal("1.25"))
    body = api.get(URL).json()
    start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    next_month = (start.replace(day=28) + timedelta(days=4)).replace(day=1)
    assert body["budgets"] == [
        {
            "limit": 1.25,
            "used": 1.0,
            "left": 0.25,
            "unit": "cost",
            "period": "month",
            "renews_at": next_month.isoformat().replace("+00:00", "Z"),
            "group": "team",
        },
        {
            "limit": 4_000,
            "used": 1_000,
            "left": 3_000,
            "unit": "tokens",
            "period": "day",
            "renews_at": (start + timedelta(days=1)).isoformat().replace("+00:00", "Z"),
            "group": None,
        },
    ]
    assert body["budget"] == body["budgets"][0]  # 80% used, against 25%
    assert datetime.fromisoformat(body["budget"]["renews_at"]) > now


def test_bob_never_sees_alices_usage(bob_api, alice, bob):
    record(alice, "alices-model", 5_000, 500, on=timezone.now())
    Budget.objects.create(user=alice, period="day", unit="tokens", limit=Decimal(10))
    body = bob_api.get(URL).json()
    assert body["days"] == []
    assert body["models"] == []
    assert body["budget"] is None
    assert body["total"]["input_tokens"] == 0
    assert b"alices-model" not in bob_api.get(URL).content


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ({"from": "yesterday"}, "“from” must be a date written YYYY-MM-DD"),
        ({"to": "2026-02-30"}, "“to” must be a date written YYYY-MM-DD"),
        ({"from": "2026-12-05", "to": "2026-12-01"}, "is after “to”"),
        ({"from": "2025-01-01", "to": "2026-06-30"}, "at most 366 days"),
        ({"to": "9999-12-31"}, "from 1970-01-01 to 9998-12-31"),
    ],
)
def test_a_bad_period_is_a_400_saying_why(api, query, said):
    response = api.get(URL, query)
    assert response.status_code == 400
    assert response.json().keys() == {"detail"}
    assert said in response.json()["detail"]


def test_credentials_are_needed(client):
    response = client.get(URL)
    assert response.status_code == 401
    assert response.json().keys() == {"detail"}


def test_the_schema_describes_it(api):
    schema = api.get("/api/v1/schema/?format=json").json()
    get = schema["paths"]["/api/v1/usage/"]["get"]
    assert {p["name"] for p in get["parameters"]} >= {"from", "to"}
    body = schema["components"]["schemas"]["Usage"]
    assert set(body["properties"]) == {"from", "to", "days", "models", "total", "budget", "budgets"}
