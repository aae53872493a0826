"""Figures of usage as the pages write them: tokens with thousands separators, money as the
budgets write it (usage.models.amount_shown)."""

from __future__ import annotations

from decimal import Decimal

from django import template

from usage.models import Budget, amount_shown

register = template.Library()


@register.filter
def thousands(value: int) -> str:
    """1234567 as "1,234,567"."""
    return f"{int(value):,}"


@register.filter
def money(value: Decimal | int) -> str:
    """A cost: "$1.20", or to four places under one ("$0.0012"), "$0.00" for nothing."""
    return amount_shown(value, Budget.Unit.COST)
