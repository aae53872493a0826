"""The period a usage report covers: whole days (UTC) from one date to another, both included,
read from `?from=` and `?to=` (YYYY-MM-DD) the same way by the usage page and the API."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from core.errors import InvalidInput

# The default period: the last 30 days, today included.
DEFAULT_DAYS = 30
# The longest period one report covers: a year, a leap year's included.
MAX_DAYS = 366
# The dates a period may name: far enough either way, and within what every database's time
# stamps hold (the day after the last one is still a date).
EARLIEST = date(1970, 1, 1)
LATEST = date(9998, 12, 31)

_ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass(frozen=True)
class Period:
    start: date
    end: date

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    def dates(self) -> list[date]:
        """Every day of the period, in order."""
        return [self.start + timedelta(days=n) for n in range(self.days)]


def today() -> date:
    return datetime.now(UTC).date()


def _parse(name: str, raw: str) -> date:
    """One date as YYYY-MM-DD (no other form of ISO 8601: no week dates, no times)."""
    found = None
    if _ISO_DAY.fullmatch(raw):
        try:
            found = date.fromisoformat(raw)
        except ValueError:
            found = None
    if found is None:
        raise InvalidInput(f"“{name}” must be a date written YYYY-MM-DD, like 2026-12-01.")
    if not EARLIEST <= found <= LATEST:
        raise InvalidInput(
            f"“{name}” must be a date from {EARLIEST.isoformat()} to {LATEST.isoformat()}."
        )
    return found


def period_parse(raw_from: str | None, raw_to: str | None, *, now: date | None = None) -> Period:
    """The period named by `from` and `to`, each optional (empty is absent): without `to`, up
    to today (UTC); without `from`, the DEFAULT_DAYS days that end on `to`. InvalidInput (a 400)
    for a date not written YYYY-MM-DD, `from` after `to`, or more than MAX_DAYS days."""
    end = _parse("to", raw_to) if raw_to else (now or today())
    start = _parse("from", raw_from) if raw_from else end - timedelta(days=DEFAULT_DAYS - 1)
    if start < EARLIEST:
        start = EARLIEST
    if start > end:
        raise InvalidInput(
            f"“from” ({start.isoformat()}) is after “to” ({end.isoformat()}): "
            "choose a start on or before the end."
        )
    period = Period(start, end)
    if period.days > MAX_DAYS:
        raise InvalidInput(
            f"A report covers at most {MAX_DAYS} days; from {start.isoformat()} to "
            f"{end.isoformat()} is {period.days:,}. Choose a shorter period."
        )
    return period
