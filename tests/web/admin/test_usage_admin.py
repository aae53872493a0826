"""Prices, budgets and the usage record in the admin: a price or a limit out of range, and a
budget for both a user and a group or for neither, are refused in words with nothing saved; the
budgets' list says what is used and left of each now; the record is read-only."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from usage.models import (
    LIMIT_RANGE_MESSAGE,
    PRICE_RANGE_MESSAGE,
    Budget,
    ModelPrice,
)
from usage.services import usage_record

pytestmark = pytest.mark.django_db

PRICE_ADD = reverse("admin:usage_modelprice_add")
BUDGET_ADD = reverse("admin:usage_budget_add")
BUDGETS = reverse("admin:usage_budget_changelist")
RECORDS = reverse("admin:usage_usagerecord_changelist")
BOTH_OR_NEITHER = "A budget is for one user or for one group: choose one of them, not both."


@pytest.fixture
def admin_client_(client, admin_user):
    client.force_login(admin_user)
    return client


def errors_of(response) -> str:
    """The form's error messages, as the page shows them (apostrophes escaped)."""
    return response.content.decode().replace("&#x27;", "'")


# --- Prices ---------------------------------------------------------------------------------------


def test_a_price_is_added_and_listed(admin_client_):
    response = admin_client_.post(
        PRICE_ADD,
        {"model": "gpt-main", "input_per_million": "2.5", "output_per_million": "1000000"},
    )

    assert response.status_code == 302
    price = ModelPrice.objects.get(model="gpt-main")
    assert price.input_per_million == Decimal("2.5")
    assert price.output_per_million == Decimal(1_000_000)
    assert (
        "gpt-main"
        in admin_client_.get(reverse("admin:usage_modelprice_changelist")).content.decode()
    )


@pytest.mark.parametrize("value", ["-1", "100000000000000000000", "1000000.000001"])
def test_a_price_out_of_range_is_refused_in_one_sentence_and_not_saved(admin_client_, value):
    response = admin_client_.post(
        PRICE_ADD, {"model": "gpt-main", "input_per_million": value, "output_per_million": "1"}
    )

    assert response.status_code == 200
    said = errors_of(response)
    assert said.count(PRICE_RANGE_MESSAGE) == 1
    assert "digits" not in said
    assert not ModelPrice.objects.exists()


def test_a_price_with_too_many_decimals_or_not_a_number_is_refused(admin_client_):
    for value in ("0.0000001", "NaN", "a lot"):
        response = admin_client_.post(
            PRICE_ADD, {"model": "gpt-main", "input_per_million": "1", "output_per_million": value}
        )
        assert response.status_code == 200, value
        assert 'class="errorlist' in response.content.decode(), value
    assert not ModelPrice.objects.exists()


def test_a_price_change_reprices_the_next_call_only(admin_client_, alice):
    price = ModelPrice.objects.create(model="gpt-main", input_per_million=1, output_per_million=1)
    first = usage_record(user_id=alice.pk, model="gpt-main", input_tokens=1000, output_tokens=0)
    url = reverse("admin:usage_modelprice_change", args=[price.pk])

    response = admin_client_.post(
        url, {"model": "gpt-main", "input_per_million": "3", "output_per_million": "1"}
    )
    second = usage_record(user_id=alice.pk, model="gpt-main", input_tokens=1000, output_tokens=0)

    assert response.status_code == 302
    assert first is not None
    assert second is not None
    first.refresh_from_db()
    assert (first.cost, second.cost) == (Decimal("0.001"), Decimal("0.003"))


# --- Budgets --------------------------------------------------------------------------------------


def budget_form(**overrides: str) -> dict[str, str]:
    data = {"user": "", "group": "", "period": "month", "unit": "tokens", "limit": "1000"}
    data.update(overrides)
    return data


def test_a_budget_for_a_user_is_added(admin_client_, alice):
    response = admin_client_.post(BUDGET_ADD, budget_form(user=str(alice.pk)))

    assert response.status_code == 302
    budget = Budget.objects.get()
    assert (budget.user, budget.group, budget.limit) == (alice, None, Decimal(1000))


def test_a_budget_for_both_a_user_and_a_group_is_refused_and_not_saved(admin_client_, alice):
    group = Group.objects.create(name="interns")

    response = admin_client_.post(BUDGET_ADD, budget_form(user=str(alice.pk), group=str(group.pk)))

    assert response.status_code == 200
    said = errors_of(response)
    assert said.count(BOTH_OR_NEITHER) == 1
    assert "budget_for_a_user_or_a_group" not in said
    assert not Budget.objects.exists()


def test_a_budget_for_nobody_is_refused_and_not_saved(admin_client_):
    response = admin_client_.post(BUDGET_ADD, budget_form())

    assert response.status_code == 200
    assert BOTH_OR_NEITHER in errors_of(response)
    assert not Budget.objects.exists()


@pytest.mark.parametrize("value", ["-1", "100000000000000000000"])
def test_a_limit_out_of_range_is_refused_in_one_sentence_and_not_saved(admin_client_, alice, value):
    response = admin_client_.post(BUDGET_ADD, budget_form(user=str(alice.pk), limit=value))

    assert response.status_code == 200
    said = errors_of(response)
    assert said.count(LIMIT_RANGE_MESSAGE) == 1
    assert "digits" not in said
    assert not Budget.objects.exists()


def test_the_budget_list_says_what_is_used_and_left_now(admin_client_, alice, bob):
    group = Group.objects.create(name="<i>interns</i>")
    bob.groups.add(group)
    ModelPrice.objects.create(model="gpt-main", input_per_million=10, output_per_million=30)
    Budget.objects.create(user=alice, period="day", unit="tokens", limit=1000)
    Budget.objects.create(group=group, period="month", unit="cost", limit=Decimal(2))
    usage_record(user_id=alice.pk, model="gpt-main", input_tokens=100, output_tokens=50)
    # Bob's 50,000 tokens cost 0.5 + 0.75 = 1.25: his group has 0.75 left.
    usage_record(user_id=bob.pk, model="gpt-main", input_tokens=50_000, output_tokens=25_000)

    page = admin_client_.get(BUDGETS).content.decode()

    assert "user alice" in page
    assert "150 tokens (15%)" in page
    assert "850 tokens until" in page
    assert "group &lt;i&gt;interns&lt;/i&gt;" in page
    assert "$1.25 (62%)" in page
    assert "$0.7500 until" in page


def test_the_budget_list_filters_by_whose_period_and_unit(admin_client_, alice):
    group = Group.objects.create(name="interns")
    Budget.objects.create(user=alice, period="day", unit="tokens", limit=1000)
    Budget.objects.create(group=group, period="month", unit="cost", limit=Decimal(2))

    for query, shown, hidden in (
        ("?for=user", "user alice", "group interns"),
        ("?for=group", "group interns", "user alice"),
        ("?period__exact=month", "group interns", "user alice"),
        ("?unit__exact=tokens", "user alice", "group interns"),
        ("?q=interns", "group interns", "user alice"),
    ):
        page = admin_client_.get(BUDGETS + query).content.decode()
        assert shown in page, query
        assert hidden not in page, query


# --- The record of every call ---------------------------------------------------------------------


def test_the_record_is_listed_filtered_and_searched(admin_client_, alice, bob, settings):
    settings.AGENT_MODEL = "gpt-main"
    usage_record(user_id=alice.pk, model="gpt-main", input_tokens=11, output_tokens=1)
    usage_record(user_id=bob.pk, model="gpt-old", input_tokens=22, output_tokens=2, kind="title")

    everyone = admin_client_.get(RECORDS)
    assert everyone.status_code == 200
    assert {r.model for r in everyone.context["cl"].result_list} == {"gpt-main", "gpt-old"}

    for query, models in (
        ("?kind__exact=title", {"gpt-old"}),
        ("?model=gpt-main", {"gpt-main"}),
        ("?q=bob", {"gpt-old"}),
        ("?q=gpt-old", {"gpt-old"}),  # a model no longer allowed: found by its exact id
        (f"?created_at__year={timezone.now().year}", {"gpt-main", "gpt-old"}),  # the dates
    ):
        response = admin_client_.get(RECORDS + query)
        assert response.status_code == 200, query
        assert {r.model for r in response.context["cl"].result_list} == models, query


def test_the_record_is_read_only_even_to_a_superuser(admin_client_, alice, session):
    record = usage_record(
        user_id=alice.pk, model="gpt-main", input_tokens=5, output_tokens=5, session_id=session.pk
    )
    assert record is not None
    change = reverse("admin:usage_usagerecord_change", args=[record.pk])

    page = admin_client_.get(change)
    assert page.status_code == 200
    assert session.session_name not in page.content.decode()  # conversation data: its id only
    assert admin_client_.get(reverse("admin:usage_usagerecord_add")).status_code == 403
    delete = reverse("admin:usage_usagerecord_delete", args=[record.pk])
    assert admin_client_.get(delete).status_code == 403
    assert admin_client_.post(change, {"input_tokens": "0"}).status_code == 403
    admin_client_.post(RECORDS, {"action": "delete_selected", "_selected_action": record.pk})
    record.refresh_from_db()
    assert record.input_tokens == 5


def test_the_budgets_list_reads_what_each_used_in_its_own_query(admin_client_, django_user_model):
    """No query per row: `used now` comes with the list (usage.selectors.with_used_now)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def listed(count: int) -> tuple[int, str]:
        for i in range(count):
            user = django_user_model.objects.create_user(f"spender{Budget.objects.count()}-{i}")
            Budget.objects.create(user=user, period="day", unit="tokens", limit=Decimal(100))
            usage_record(user_id=user.pk, model="m", input_tokens=30, output_tokens=10)
        with CaptureQueriesContext(connection) as ctx:
            page = admin_client_.get(BUDGETS)
        assert page.status_code == 200
        return len(ctx.captured_queries), page.content.decode()

    one, _ = listed(1)
    more, page = listed(5)
    assert more == one
    assert page.count("40 tokens (40%)") == 6
