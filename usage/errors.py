"""A turn refused because a budget is used up."""

from __future__ import annotations

from datetime import datetime

from core.errors import DomainError


class BudgetExhausted(DomainError):
    """429: the budget renews at `renews_at`; nothing was sent to the model."""

    code = "throttled"

    def __init__(self, *, whose: str, period: str, limit: str, used: str, renews_at: datetime):
        self.renews_at = renews_at
        when = renews_at.strftime("%Y-%m-%d %H:%M UTC")
        super().__init__(
            f"{whose} {period} budget of {limit} is used up ({used} used), so this message was "
            f"not sent to the model. The budget renews at {when}."
        )
