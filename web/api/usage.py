"""REST API: your own usage (/api/v1/usage/?from=&to=): per day and per model, the total, and
the budgets that bound you. Thin: usage.periods reads the period, usage.selectors the figures;
this module only shapes them as the contract says."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import TypedDict

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import User
from usage.models import Budget
from usage.periods import DEFAULT_DAYS, MAX_DAYS, period_parse
from usage.selectors import BudgetState, Row, Totals, budget_states, usage_report

COST_PLACES = Decimal("0.000001")


class ModelUsage(TypedDict):
    model: str
    input_tokens: int
    output_tokens: int
    cost: float


class DayUsageOut(TypedDict):
    date: str
    input_tokens: int
    output_tokens: int
    cost: float
    models: list[ModelUsage]


class TotalOut(TypedDict):
    input_tokens: int
    output_tokens: int
    cost: float


class BudgetOut(TypedDict):
    limit: float | int
    used: float | int
    left: float | int
    unit: str
    period: str
    renews_at: str
    group: str | None


UsageOut = TypedDict(
    "UsageOut",
    {
        "from": str,
        "to": str,
        "days": list[DayUsageOut],
        "models": list[ModelUsage],
        "total": TotalOut,
        "budget": BudgetOut | None,
        "budgets": list[BudgetOut],
    },
)


def cost(value: Decimal) -> float:
    """A cost as a JSON number: rounded to the millionth."""
    return float(value.quantize(COST_PLACES, rounding=ROUND_HALF_EVEN))


def amount(value: Decimal, unit: str) -> float | int:
    """A budget's figure: whole tokens, or money as `cost`."""
    return int(value) if unit == Budget.Unit.TOKENS else cost(value)


def utc(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _model(row: Row) -> ModelUsage:
    return {
        "model": row.key,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "cost": cost(row.cost),
    }


def _total(got: Totals) -> TotalOut:
    return {
        "input_tokens": got.input_tokens,
        "output_tokens": got.output_tokens,
        "cost": cost(got.cost),
    }


def budget_data(state: BudgetState) -> BudgetOut:
    budget = state.budget
    unit = str(budget.unit)
    return {
        "limit": amount(budget.limit, unit),
        "used": amount(state.used, unit),
        "left": amount(state.left, unit),
        "unit": unit,
        "period": str(budget.period),
        "renews_at": utc(state.renews_at),
        "group": budget.group.name if budget.group is not None else None,
    }


def usage_data(user: User, raw_from: str | None, raw_to: str | None) -> UsageOut:
    period = period_parse(raw_from, raw_to)
    report = usage_report(user, period.start, period.end)
    budgets = [budget_data(state) for state in budget_states(user)]
    return {
        "from": period.start.isoformat(),
        "to": period.end.isoformat(),
        "days": [
            {
                "date": day.day.isoformat(),
                **_total(day.total),
                "models": [_model(row) for row in day.models],
            }
            for day in report.days
        ],
        "models": [_model(row) for row in report.models],
        "total": _total(report.total),
        "budget": budgets[0] if budgets else None,
        "budgets": budgets,
    }


# --- the schema ----------------------------------------------------------------------------------


class ModelUsageSerializer(serializers.Serializer[ModelUsage]):
    model = serializers.CharField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cost = serializers.FloatField(help_text="In the prices' currency, rounded to 6 places")


class UsageDaySerializer(serializers.Serializer[DayUsageOut]):
    date = serializers.DateField(help_text="A day (UTC) with usage; days without any are left out")
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cost = serializers.FloatField()
    models = ModelUsageSerializer(many=True, help_text="The day's figures by model")


class UsageTotalSerializer(serializers.Serializer[TotalOut]):
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cost = serializers.FloatField()


class BudgetSerializer(serializers.Serializer[BudgetOut]):
    limit = serializers.FloatField(help_text="Tokens (a whole number), or money")
    used = serializers.FloatField(help_text="Used in the budget's current period")
    left = serializers.FloatField(help_text="What is left of it until it renews")
    unit = serializers.ChoiceField(choices=Budget.Unit.values)
    period = serializers.ChoiceField(
        choices=Budget.Period.values, help_text="A day or a month, UTC"
    )
    renews_at = serializers.DateTimeField(help_text="When the next period starts (UTC)")
    group = serializers.CharField(
        allow_null=True,
        help_text="The group whose budget it is (its members' usage together), "
        "or null for your own",
    )


class UsageSerializer(serializers.Serializer[UsageOut]):
    from_ = serializers.DateField()
    to = serializers.DateField()
    days = UsageDaySerializer(many=True, help_text="Oldest first")
    models = ModelUsageSerializer(many=True, help_text="The period's figures by model")
    total = UsageTotalSerializer()
    budget = BudgetSerializer(
        allow_null=True, help_text="The most used of `budgets`, or null when none bounds you"
    )
    budgets = BudgetSerializer(
        many=True, help_text="Every budget that bounds you, the most used first"
    )

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        fields = super().get_fields()
        # "from" is a Python keyword: the field is declared as from_ and named here.
        return {"from": fields.pop("from_"), **fields}


DATE_HELP = "A day as YYYY-MM-DD (UTC), both days included"


def _user(request: Request) -> User:
    user = request.user
    if not isinstance(user, User):  # MayUseApi lets only users in
        raise NotAuthenticated()
    return user


class UsageView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "from",
                OpenApiTypes.DATE,
                description=f"{DATE_HELP}; default: {DEFAULT_DAYS - 1} days before `to`",
            ),
            OpenApiParameter("to", OpenApiTypes.DATE, description=f"{DATE_HELP}; default: today"),
        ],
        responses={200: UsageSerializer},
        summary=f"Your usage per day and per model, and your budgets (at most {MAX_DAYS} days)",
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        return Response(usage_data(_user(request), params.get("from"), params.get("to")))
