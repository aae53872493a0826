"""Prices, budgets and the record of every model call's usage."""

from __future__ import annotations

from decimal import Decimal
from typing import ClassVar

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from sessions_app.models import Branch, Session, Turn

# A price per million tokens: from 0 to a million (money units), to six decimal places.
PRICE_MAX = Decimal(1_000_000)
# A budget's limit: from 0 to a thousand billion (tokens or money).
LIMIT_MAX = Decimal(10**12)
# The most tokens one call is counted for: a server that reports more is not believed.
TOKENS_MAX = 10**10
# What the forms and the constraints say of a value out of range.
PRICE_RANGE_MESSAGE = f"A price per million tokens is from 0 to {PRICE_MAX:,}."
LIMIT_RANGE_MESSAGE = (
    f"A budget's limit is from 0 to {LIMIT_MAX:,} (tokens, or money in the prices' currency)."
)

_price = {
    "max_digits": 13,
    "decimal_places": 6,
    "validators": [MinValueValidator(Decimal(0)), MaxValueValidator(PRICE_MAX)],
}


class ModelPrice(models.Model):
    """What a model's tokens cost, per million, in the server's currency (the README: US
    dollars unless the operator reads it otherwise). A model with no price costs nothing."""

    model = models.CharField(max_length=200, unique=True, help_text="The model id, as called.")
    input_per_million = models.DecimalField("input, per million tokens", **_price)  # type: ignore[arg-type]
    output_per_million = models.DecimalField("output, per million tokens", **_price)  # type: ignore[arg-type]
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("model",)
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.CheckConstraint(
                condition=Q(input_per_million__gte=0, input_per_million__lte=PRICE_MAX)
                & Q(output_per_million__gte=0, output_per_million__lte=PRICE_MAX),
                name="model_price_in_range",
                violation_error_message=PRICE_RANGE_MESSAGE,
            )
        ]

    def __str__(self) -> str:
        return self.model


class Budget(models.Model):
    """A bound on one user's usage, or on a group's (its members' together), per day or month
    (UTC), in tokens (input and output) or in money (their cost)."""

    class Period(models.TextChoices):
        DAY = "day", "day"
        MONTH = "month", "month"

    class Unit(models.TextChoices):
        TOKENS = "tokens", "tokens"
        COST = "cost", "money"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="budgets",
    )
    group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.CASCADE, related_name="budgets"
    )
    period = models.CharField(max_length=8, choices=Period.choices, default=Period.MONTH)
    unit = models.CharField(max_length=8, choices=Unit.choices, default=Unit.COST)
    limit = models.DecimalField(
        max_digits=19,
        decimal_places=6,
        validators=[MinValueValidator(Decimal(0)), MaxValueValidator(LIMIT_MAX)],
        help_text="Tokens, or money in the prices' currency.",
    )
    applies_to_administrators = models.BooleanField(
        default=False, help_text="Administrators (staff) are exempt unless this is ticked."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, group__isnull=True)
                | Q(user__isnull=True, group__isnull=False),
                name="budget_for_a_user_or_a_group",
                violation_error_message=(
                    "A budget is for one user or for one group: choose one of them, not both."
                ),
            ),
            models.CheckConstraint(
                condition=Q(limit__gte=0, limit__lte=LIMIT_MAX),
                name="budget_limit_in_range",
                violation_error_message=LIMIT_RANGE_MESSAGE,
            ),
        ]

    def __str__(self) -> str:
        whose = self.user.username if self.user else (self.group.name if self.group else "?")
        return f"{whose}: {self.limit_shown} a {self.period}"

    @property
    def limit_shown(self) -> str:
        return amount_shown(self.limit, self.unit)


def amount_shown(value: Decimal | int, unit: str) -> str:
    if unit == Budget.Unit.TOKENS:
        return f"{int(value):,} tokens"
    return f"${Decimal(value):,.2f}" if value >= 1 or value == 0 else f"${Decimal(value):,.4f}"


class UsageRecord(models.Model):
    """One model call's usage (a turn's, a summary's or a title's), with the price at the time.
    It stays when its session, branch or turn is deleted (a budget cannot be undone by deleting a
    conversation) and goes with its user."""

    class Kind(models.TextChoices):
        TURN = "turn", "turn"
        SUMMARY = "summary", "summary"
        TITLE = "title", "title"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="usage_records"
    )
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    branch = models.ForeignKey(
        Branch, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    turn = models.ForeignKey(
        Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.TURN)
    model = models.CharField(max_length=200)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    input_price = models.DecimalField(max_digits=13, decimal_places=6, default=Decimal(0))
    output_price = models.DecimalField(max_digits=13, decimal_places=6, default=Decimal(0))
    cost = models.DecimalField(max_digits=24, decimal_places=9, default=Decimal(0))
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["user", "created_at"], name="usage_user_created"),
            models.Index(fields=["session", "created_at"], name="usage_session_created"),
            models.Index(fields=["created_at"], name="usage_created"),
        ]

    def __str__(self) -> str:
        return f"{self.model}: {self.input_tokens}+{self.output_tokens} tokens"
