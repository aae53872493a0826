"""Usage recorded as the worker records it: through real turns answered by the fake model server,
or, for figures of other days and models, through the one write of usage (usage.services)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from usage.models import ModelPrice, UsageRecord
from usage.services import usage_record


def price(model: str, input_per_million: str, output_per_million: str) -> ModelPrice:
    return ModelPrice.objects.create(
        model=model,
        input_per_million=Decimal(input_per_million),
        output_per_million=Decimal(output_per_million),
    )


def record(
    user, model: str, tokens_in: int, tokens_out: int, *, on: datetime, **ids
) -> UsageRecord:
    """One call's usage, priced as usage.services prices it, dated `on` (UTC)."""
    made = usage_record(
        user_id=user.pk, model=model, input_tokens=tokens_in, output_tokens=tokens_out, **ids
    )
    assert made is not None
    UsageRecord.objects.filter(pk=made.pk).update(created_at=on)
    made.refresh_from_db()
    return made


def day(year: int, month: int, dd: int, hour: int = 12) -> datetime:
    return datetime(year, month, dd, hour, tzinfo=UTC)
