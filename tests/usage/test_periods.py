"""The period of a usage report: read the same way by the page and the API."""

from __future__ import annotations

from datetime import date

import pytest

from core.errors import InvalidInput
from usage.periods import MAX_DAYS, Period, period_parse

TODAY = date(2026, 12, 8)


def test_no_dates_is_the_last_30_days_to_today():
    assert period_parse(None, None, now=TODAY) == Period(date(2026, 11, 9), TODAY)
    assert period_parse("", "", now=TODAY).days == 30


def test_only_to_is_the_30_days_that_end_there_and_only_from_runs_to_today():
    assert period_parse(None, "2026-06-30", now=TODAY) == Period(
        date(2026, 6, 1), date(2026, 6, 30)
    )
    assert period_parse("2026-12-01", None, now=TODAY) == Period(date(2026, 12, 1), TODAY)


def test_one_day_is_a_period():
    assert period_parse("2026-12-08", "2026-12-08", now=TODAY).days == 1


@pytest.mark.parametrize(
    "raw",
    [
        "yesterday",
        "2026-13-01",
        "2026-02-30",
        "20261201",
        "2026-W49-1",
        "2026-12-01T00:00",
        " 2026-12-01",
        "\u0662\u0660\u0662\u0666-\u0661\u0662-\u0660\u0661",  # Arabic-Indic digits,
    ],
)
def test_a_date_not_written_yyyy_mm_dd_is_refused_saying_how_to_write_it(raw):
    with pytest.raises(InvalidInput, match="YYYY-MM-DD"):
        period_parse(raw, None, now=TODAY)
    with pytest.raises(InvalidInput, match="“to” must be"):
        period_parse(None, raw, now=TODAY)


def test_from_after_to_is_refused():
    with pytest.raises(InvalidInput, match="after"):
        period_parse("2026-12-09", "2026-12-08", now=TODAY)


def test_a_year_and_a_day_is_the_most_and_one_more_is_refused():
    assert period_parse("2024-01-01", "2024-12-31", now=TODAY).days == MAX_DAYS == 366
    with pytest.raises(InvalidInput, match="at most 366 days"):
        period_parse("2025-01-01", "2026-01-02", now=TODAY)


def test_dates_at_the_ends_of_the_calendar_are_refused_not_overflowed():
    with pytest.raises(InvalidInput, match="from 1970-01-01 to 9998-12-31"):
        period_parse("9999-12-31", "9999-12-31", now=TODAY)
    with pytest.raises(InvalidInput, match="from 1970-01-01"):
        period_parse("0001-01-01", "0001-01-02", now=TODAY)
    assert period_parse(None, "1970-01-05", now=TODAY).start == date(1970, 1, 1)
