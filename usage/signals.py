"""What every turn asks, kept in the cache: whether any budget exists (usage.selectors.budgets_for
asks it as each turn starts) and the prices (usage.services.usage_record prices each call), each
forgotten whenever a budget or a price is saved or deleted, however it was."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from .models import Budget, ModelPrice

ANY_BUDGET = "usage:any-budget"
PRICES = "usage:prices"
KEEP_SECONDS = 300


def any_budget() -> bool:
    kept = cache.get(ANY_BUDGET)
    if isinstance(kept, bool):
        return kept
    found = Budget.objects.exists()
    cache.set(ANY_BUDGET, found, KEEP_SECONDS)
    return found


@receiver([post_save, post_delete], sender=Budget)
def budget_changed(**kwargs: Any) -> None:
    cache.delete(ANY_BUDGET)


def prices() -> dict[str, tuple[Decimal, Decimal]]:
    """Each priced model's input and output price per million tokens."""
    kept = cache.get(PRICES)
    if isinstance(kept, dict):
        return kept
    found = {p.model: (p.input_per_million, p.output_per_million) for p in ModelPrice.objects.all()}
    cache.set(PRICES, found, KEEP_SECONDS)
    return found


@receiver([post_save, post_delete], sender=ModelPrice)
def price_changed(**kwargs: Any) -> None:
    cache.delete(PRICES)
