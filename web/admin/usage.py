"""Admin console for usage: the models' prices, the budgets (with what is used and left of each
now) and the record of every model call, which is read-only (the calls write it; it goes with its
user). The figures by user, group and model over a period are a page of their own
(web.admin.usage_report).

A price or a limit out of range is refused by the form in one clear sentence (the same the
database's constraints say), so nothing is saved; so is a budget for both a user and a group, or
for neither (the model's constraint, in its words)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html

from core.model_choice import allowed_models
from usage.models import (
    LIMIT_MAX,
    LIMIT_RANGE_MESSAGE,
    PRICE_MAX,
    PRICE_RANGE_MESSAGE,
    Budget,
    ModelPrice,
    UsageRecord,
)
from usage.selectors import BudgetState, budget_state, with_used_now
from usage.signals import prices

PLACES = 6  # the decimal places the prices and limits keep


def bounded_decimal(*, label: str, maximum: Decimal, message: str, help_text: str = "") -> Any:
    """A decimal form field from 0 to `maximum`, saying `message` for a value outside (and for
    no other reason than the range: no count of digits)."""
    return forms.DecimalField(
        label=label,
        min_value=Decimal(0),
        max_value=maximum,
        decimal_places=PLACES,
        help_text=help_text,
        error_messages={"min_value": message, "max_value": message},
    )


# --- Prices ---------------------------------------------------------------------------------------


class ModelPriceForm(forms.ModelForm):
    input_per_million = bounded_decimal(
        label="Input, per million tokens", maximum=PRICE_MAX, message=PRICE_RANGE_MESSAGE
    )
    output_per_million = bounded_decimal(
        label="Output, per million tokens", maximum=PRICE_MAX, message=PRICE_RANGE_MESSAGE
    )

    class Meta:
        model = ModelPrice
        fields = ("model", "input_per_million", "output_per_million")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The admin shows help as markup: the ids (the settings') are escaped.
        self.fields["model"].help_text = format_html(
            "The model id, as called; allowed here: {}. A call is priced as its model's price is "
            "at the time; a model with no price costs nothing.",
            ", ".join(allowed_models()),
        )


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    form = ModelPriceForm
    list_display = ("model", "input_per_million", "output_per_million", "updated_at")
    search_fields = ("model",)


# --- Budgets --------------------------------------------------------------------------------------


class BudgetForm(forms.ModelForm):
    limit = bounded_decimal(
        label="Limit",
        maximum=LIMIT_MAX,
        message=LIMIT_RANGE_MESSAGE,
        help_text="Tokens (input and output), or money in the prices' currency.",
    )

    class Meta:
        model = Budget
        fields = ("user", "group", "period", "unit", "limit", "applies_to_administrators")
        help_texts = {  # noqa: RUF012
            "user": "One user's budget; or choose a group instead (not both).",
            "group": "The group's members' usage together; or choose a user instead (not both).",
            "period": "A day or a calendar month (UTC): what is used starts again at the next.",
        }


class WhoseFilter(admin.SimpleListFilter):
    title = "for"
    parameter_name = "for"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("user", "a user"), ("group", "a group")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Budget]) -> QuerySet[Budget]:
        if self.value() == "user":
            return queryset.filter(user__isnull=False)
        if self.value() == "group":
            return queryset.filter(group__isnull=False)
        return queryset


def state_now(budget: Budget) -> BudgetState:
    """What is used of `budget` in its period now, as the list's query read it
    (`BudgetAdmin.get_queryset`: usage.selectors.with_used_now)."""
    return budget_state(budget, timezone.now())


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    form = BudgetForm
    list_display = (
        "whose",
        "period",
        "unit",
        "limit_shown",
        "used_now",
        "left_now",
        "applies_to_administrators",
        "updated_at",
    )
    list_display_links = ("whose",)
    list_filter = (WhoseFilter, "period", "unit", "applies_to_administrators")
    list_select_related = ("user", "group")
    search_fields = ("user__username", "group__name")
    autocomplete_fields = ("user",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Budget]:
        # What each budget has used now, in the list's own query (no query per row).
        return with_used_now(super().get_queryset(request), timezone.now())

    @admin.display(description="For")
    def whose(self, budget: Budget) -> str:
        if budget.user is not None:
            return f"user {budget.user.username}"
        return f"group {budget.group.name}" if budget.group is not None else "?"

    @admin.display(description="Limit", ordering="limit")
    def limit_shown(self, budget: Budget) -> str:
        return budget.limit_shown

    @admin.display(description="Used now")
    def used_now(self, budget: Budget) -> str:
        state = state_now(budget)
        return f"{state.used_shown()} ({state.fraction:.0%})"

    @admin.display(description="Left now")
    def left_now(self, budget: Budget) -> str:
        state = state_now(budget)
        return f"{state.left_shown()} until {state.renews_at:%Y-%m-%d %H:%M} UTC"


# --- The record of every call ---------------------------------------------------------------------


class ModelFilter(admin.SimpleListFilter):
    """The models this server allows or prices: known without reading the whole record (a
    model no longer among them is found by searching its exact id)."""

    title = "model"
    parameter_name = "model"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        names = dict.fromkeys([*allowed_models(), *sorted(prices())])
        return [(name, name) for name in names]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[UsageRecord]
    ) -> QuerySet[UsageRecord]:
        value = self.value()
        return queryset.filter(model=value) if value else queryset


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):
    """Read-only: written by the model calls, kept when their conversation goes (a budget cannot
    be undone by deleting one), gone with their user."""

    list_display = (
        "created_at",
        "user",
        "kind",
        "model",
        "input_tokens",
        "output_tokens",
        "cost",
        "session_ref",
    )
    list_filter = ("kind", ModelFilter, "created_at")
    list_select_related = ("user",)
    search_fields = ("user__username", "=model")
    date_hierarchy = "created_at"
    show_full_result_count = False
    # The session, branch and turn by id only: their names are conversation data.
    fields = (
        "created_at",
        "user",
        "kind",
        "model",
        "input_tokens",
        "output_tokens",
        "input_price",
        "output_price",
        "cost",
        "session_ref",
        "branch_ref",
        "turn_ref",
    )
    readonly_fields = fields

    @admin.display(description="session")
    def session_ref(self, record: UsageRecord) -> str:
        return str(record.session_id or "-")

    @admin.display(description="branch")
    def branch_ref(self, record: UsageRecord) -> str:
        return str(record.branch_id or "-")

    @admin.display(description="turn")
    def turn_ref(self, record: UsageRecord) -> str:
        return str(record.turn_id or "-")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: UsageRecord | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: UsageRecord | None = None) -> bool:
        return False
