"""Reads of usage: the figures by day and by model, a conversation's cost, and the budgets that
bound a user with what is left of each."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db.models import (
    Case,
    Count,
    DateTimeField,
    DecimalField,
    F,
    Func,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from .errors import BudgetExhausted
from .models import Budget, UsageRecord, amount_shown
from .signals import any_budget

if TYPE_CHECKING:
    from accounts.models import User
    from sessions_app.models import Session

ZERO = Decimal(0)


def period_bounds(period: str, now: datetime) -> tuple[datetime, datetime]:
    """The start and end (the renewal) of the day or month (UTC) that holds `now`."""
    now = now.astimezone(UTC)
    start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == Budget.Period.DAY:
        return start, start + timedelta(days=1)
    start = start.replace(day=1)
    end = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return start, end


@dataclass(frozen=True)
class Totals:
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = ZERO
    calls: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def _sums(prefix: str = "", only: Q | None = None) -> dict[str, Any]:
    """The aggregates of `Totals`, named with `prefix`, over the records `only` selects."""
    return {
        f"{prefix}i": Coalesce(Sum("input_tokens", filter=only), 0),
        f"{prefix}o": Coalesce(Sum("output_tokens", filter=only), 0),
        f"{prefix}c": Sum("cost", filter=only),
        f"{prefix}n": Count("id", filter=only),
    }


def _totals_of(got: dict[str, Any], prefix: str = "") -> Totals:
    return Totals(
        int(got[f"{prefix}i"]),
        int(got[f"{prefix}o"]),
        got[f"{prefix}c"] or ZERO,
        int(got[f"{prefix}n"]),
    )


def totals(records: QuerySet[UsageRecord]) -> Totals:
    return _totals_of(records.aggregate(**_sums()))


@dataclass(frozen=True)
class BudgetState:
    budget: Budget
    used: Decimal
    renews_at: datetime

    @property
    def left(self) -> Decimal:
        return max(self.budget.limit - self.used, ZERO)

    @property
    def spent(self) -> bool:
        return self.used >= self.budget.limit

    @property
    def fraction(self) -> float:
        limit = self.budget.limit
        return 1.0 if limit <= 0 else min(float(self.used / limit), 1.0)

    @property
    def whose(self) -> str:
        group = self.budget.group
        return f"The group {group.name}'s" if group is not None else "Your"

    def used_shown(self) -> str:
        return amount_shown(self.used, self.budget.unit)

    def left_shown(self) -> str:
        return amount_shown(self.left, self.budget.unit)


def exempt(user: User, budget: Budget) -> bool:
    return user.is_staff and not budget.applies_to_administrators


def budgets_for(user: User, now: datetime | None = None) -> list[Budget]:
    """The budgets that bound `user`: their own and their groups', each with what is used of
    it now (`with_used_now`: one query; none while no budget exists at all, as the cache says:
    usage.signals)."""
    if not any_budget():
        return []
    found = with_used_now(
        Budget.objects.filter(Q(user=user) | Q(group__user=user)).select_related("group"),
        now or timezone.now(),
    )
    return [b for b in dict.fromkeys(found) if not exempt(user, b)]


def _summed(records: QuerySet[UsageRecord], unit: str) -> Subquery:
    """The records' tokens, or their cost, as one value (SUM without GROUP BY)."""
    amount = F("input_tokens") + F("output_tokens") if unit == Budget.Unit.TOKENS else F("cost")
    total = Func(amount, function="SUM", output_field=DecimalField(max_digits=30, decimal_places=9))
    return Subquery(records.order_by().annotate(total=total).values("total")[:1])


def with_used_now(budgets: QuerySet[Budget], now: datetime) -> QuerySet[Budget]:
    """`budgets`, each annotated with `used_now`: what its user, or its group's members
    together, used since its period (UTC day or month) began, in its unit; in the one query
    that reads them (the turn's check, the admin's list)."""
    day, month = (
        period_bounds(Budget.Period.DAY, now)[0],
        period_bounds(Budget.Period.MONTH, now)[0],
    )
    since = UsageRecord.objects.filter(created_at__gte=OuterRef("period_start"))
    mine, theirs = since.filter(user=OuterRef("user")), since.filter(user__groups=OuterRef("group"))
    used = {
        unit: Case(
            When(user__isnull=False, then=_summed(mine, unit)), default=_summed(theirs, unit)
        )
        for unit in Budget.Unit.values
    }
    return budgets.annotate(
        period_start=Case(
            When(period=Budget.Period.DAY, then=Value(day)),
            default=Value(month),
            output_field=DateTimeField(),
        ),
        used_now=Coalesce(
            Case(
                When(unit=Budget.Unit.TOKENS, then=used[Budget.Unit.TOKENS]),
                default=used[Budget.Unit.COST],
            ),
            Value(ZERO),
            output_field=DecimalField(max_digits=30, decimal_places=9),
        ),
    )


def budget_state(budget: Budget, now: datetime) -> BudgetState:
    """A budget read through `with_used_now`, with when its period ends."""
    return BudgetState(budget, budget.used_now, period_bounds(budget.period, now)[1])  # type: ignore[attr-defined]


def budget_states(user: User, now: datetime | None = None) -> list[BudgetState]:
    """Each budget that bounds `user`, with what is used of it in its period now, the most
    used first (one query)."""
    now = now or timezone.now()
    states = [budget_state(budget, now) for budget in budgets_for(user, now)]
    return sorted(states, key=lambda s: -s.fraction)


def budget_check(session: Session) -> None:
    """Refuse a turn of `session`'s owner while a budget of theirs is used up (BudgetExhausted,
    429, saying when it renews). Called as a turn is queued and again as a worker claims it,
    before the model is called (sessions_app.hooks.turn_admission)."""
    user = session.owner
    for state in budget_states(user):
        if state.spent:
            budget = state.budget
            raise BudgetExhausted(
                whose=state.whose,
                period="daily" if budget.period == Budget.Period.DAY else "monthly",
                limit=budget.limit_shown,
                used=state.used_shown(),
                renews_at=state.renews_at,
            )


# --- the figures -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One line of figures: a day, a model, a user or a group, with its totals."""

    key: str
    input_tokens: int
    output_tokens: int
    cost: Decimal

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def _rows(records: QuerySet[UsageRecord], field: str) -> list[Row]:
    grouped = (
        records.values(field)
        .annotate(i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cost"))
        .order_by(field)
    )
    return [Row(str(g[field]), int(g["i"] or 0), int(g["o"] or 0), g["c"] or ZERO) for g in grouped]


def in_period(records: QuerySet[UsageRecord], start: date, end: date) -> QuerySet[UsageRecord]:
    """The records of the days from `start` to `end` (both included, UTC)."""
    begin = datetime(start.year, start.month, start.day, tzinfo=UTC)
    stop = datetime(end.year, end.month, end.day, tzinfo=UTC) + timedelta(days=1)
    return records.filter(created_at__gte=begin, created_at__lt=stop)


def by_model(records: QuerySet[UsageRecord]) -> list[Row]:
    return _rows(records, "model")


def by_day_and_model(records: QuerySet[UsageRecord]) -> dict[str, list[Row]]:
    """Each day's figures by model."""
    days: dict[str, list[Row]] = {}
    grouped = (
        records.annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values("day", "model")
        .annotate(i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cost"))
        .order_by("day", "model")
    )
    for g in grouped:
        days.setdefault(str(g["day"]), []).append(
            Row(g["model"], int(g["i"] or 0), int(g["o"] or 0), g["c"] or ZERO)
        )
    return days


def by_user(records: QuerySet[UsageRecord]) -> list[Row]:
    return _rows(records, "user__username")


def by_group(records: QuerySet[UsageRecord]) -> list[Row]:
    """Each group's members' figures (a member of two groups counts in both); those of users in
    no group as "(no group)"."""
    rows = [r for r in _rows(records.filter(user__groups__isnull=False), "user__groups__name")]
    alone = totals(records.filter(user__groups__isnull=True))
    if alone.calls:
        rows.append(Row("(no group)", alone.input_tokens, alone.output_tokens, alone.cost))
    return rows


def of_user(user: User) -> QuerySet[UsageRecord]:
    return UsageRecord.objects.filter(user=user)


def sum_rows(rows: Iterable[Row]) -> Totals:
    i = o = 0
    c = ZERO
    for r in rows:
        i, o, c = i + r.input_tokens, o + r.output_tokens, c + r.cost
    return Totals(i, o, c)


# --- what a user sees of their own usage -------------------------------------------------------


@dataclass(frozen=True)
class DayUsage:
    """One day's figures (UTC), by model."""

    day: date
    models: list[Row]

    @property
    def total(self) -> Totals:
        return sum_rows(self.models)


@dataclass(frozen=True)
class UsageReport:
    """A user's usage over the days from `start` to `end` (both included, UTC): the days that
    have any, each by model, the models over the whole period and the total."""

    start: date
    end: date
    days: list[DayUsage]
    models: list[Row]
    total: Totals


def usage_report(user: User, start: date, end: date) -> UsageReport:
    """`user`'s own records of the period, grouped by day and model in one query; the models'
    figures and the total are added up from those groups."""
    grouped = by_day_and_model(in_period(of_user(user), start, end))
    days = [DayUsage(date.fromisoformat(day), rows) for day, rows in grouped.items()]
    per_model: dict[str, list[Row]] = {}
    for day in days:
        for row in day.models:
            per_model.setdefault(row.key, []).append(row)
    models = []
    for model in sorted(per_model):
        got = sum_rows(per_model[model])
        models.append(Row(model, got.input_tokens, got.output_tokens, got.cost))
    return UsageReport(start, end, days, models, sum_rows(models))


@dataclass(frozen=True)
class ConversationUsage:
    """What a conversation's model calls used so far, and those made on one of its branches."""

    session: Totals
    branch: Totals


def conversation_usage(session: Session, branch_id: int) -> ConversationUsage:
    """The session's totals and those of one of its branches: one query (the chat page's
    header)."""
    got = UsageRecord.objects.filter(session=session).aggregate(
        **_sums(), **_sums("b", Q(branch_id=branch_id))
    )
    return ConversationUsage(_totals_of(got), _totals_of(got, "b"))
