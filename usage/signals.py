"""What every turn asks, kept in the cache: whether any budget exists (usage.selectors.budgets_for
asks it as each turn starts) and the prices (usage.services.usage_record prices each call), each
forgotten whenever a budget or a price is saved or deleted, however it was."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, cast

from django.core.cache import cache
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from .models import Budget, ModelPrice

ANY_BUDGET = "usage:any-budget"
PRICES = "usage:prices"
KEEP_SECONDS = 300


def any_budget() -> bool:
    return cast(bool, cache.get_or_set(ANY_BUDGET, Budget.objects.exists, KEEP_SECONDS))


@receiver([post_save, post_delete], sender=Budget)
def budget_changed(**kwargs: Any) -> None:
    cache.delete(ANY_BUDGET)


def prices() -> dict[str, tuple[Decimal, Decimal]]:
    """Each priced model's input and output price per million tokens."""
    return cast(
        "dict[str, tuple[Decimal, Decimal]]",
        cache.get_or_set(
            PRICES,
            lambda: {
                p.model: (p.input_per_million, p.output_per_million)
                for p in ModelPrice.objects.all()
            },
            KEEP_SECONDS,
        ),
    )


@receiver([post_save, post_delete], sender=ModelPrice)
def price_changed(**kwargs: Any) -> None:
    cache.delete(PRICES)
