"""The one write of usage: a model call's transaction, priced as the model's price is now."""

from __future__ import annotations

from decimal import Decimal

from .models import TOKENS_MAX, UsageRecord
from .signals import prices

MILLION = Decimal(1_000_000)
# Costs are kept to the billionth of a money unit.
COST_PLACES = Decimal("0.000000001")


def _count(value: object) -> int:
    """A token count a model server reported, believed within [0, TOKENS_MAX]."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return min(max(value, 0), TOKENS_MAX)


def usage_record(
    *,
    user_id: int,
    model: str,
    input_tokens: object,
    output_tokens: object,
    kind: str = UsageRecord.Kind.TURN,
    session_id: int | None = None,
    branch_id: int | None = None,
    turn_id: int | None = None,
) -> UsageRecord | None:
    """Record one call's usage with its price at the time (none, for a model with no price: it
    costs nothing). Nothing for a call that reported no tokens."""
    tokens_in, tokens_out = _count(input_tokens), _count(output_tokens)
    if not tokens_in and not tokens_out:
        return None
    in_price, out_price = prices().get(model[:200], (Decimal(0), Decimal(0)))
    cost = (tokens_in * in_price + tokens_out * out_price) / MILLION
    return UsageRecord.objects.create(
        user_id=user_id,
        session_id=session_id,
        branch_id=branch_id,
        turn_id=turn_id,
        kind=kind,
        model=model[:200],
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        input_price=in_price,
        output_price=out_price,
        cost=cost.quantize(COST_PLACES),
    )
