"""The usage page's chart of tokens per day, drawn on the server as SVG bars (no script): one slot
per day of the period, each bar its input tokens with its output tokens on top, and the summary
a screen reader reads in place of the picture. The figures are also in the page's table."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from usage.models import Budget, amount_shown
from usage.periods import Period
from usage.selectors import UsageReport

# The drawing's own units: each day's slot is SLOT wide, the bars' full height HEIGHT (the SVG
# is stretched to the page's width; its words are the page's, outside it).
SLOT = 10
BAR = 8
HEIGHT = 100


@dataclass(frozen=True)
class Bar:
    """One day's bar: its input part from the bottom, its output part on top of it."""

    x: int
    input_y: str
    input_height: str
    output_y: str
    output_height: str
    title: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    most: int  # the tallest day's tokens: the top of the scale
    summary: str  # the chart in words (its aria-label)


def day_shown(day: date) -> str:
    return f"{day.day} {day:%b %Y}"


def tokens_shown(count: int) -> str:
    return f"{count:,} token{'' if count == 1 else 's'}"


def _units(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def summary(period: Period, report: UsageReport) -> str:
    total = report.total
    span = f"from {day_shown(period.start)} to {day_shown(period.end)}"
    if not report.days:
        return f"Tokens per day {span}: no usage."
    busiest = max(report.days, key=lambda d: (d.total.tokens, d.day))
    days = len(report.days)
    return (
        f"Tokens per day {span}: {tokens_shown(total.tokens)} in all "
        f"({total.input_tokens:,} input, {total.output_tokens:,} output) on {days} "
        f"day{'' if days == 1 else 's'}, costing {amount_shown(total.cost, Budget.Unit.COST)}; "
        f"the most, {tokens_shown(busiest.total.tokens)}, on {day_shown(busiest.day)}."
    )


def day_chart(period: Period, report: UsageReport) -> Chart:
    """The bars of every day of the period (a day without usage has none), scaled to the
    busiest day."""
    by_day = {d.day: d.total for d in report.days}
    most = max((t.tokens for t in by_day.values()), default=0)
    bars = []
    for n, day in enumerate(period.dates()):
        got = by_day.get(day)
        if got is None or not got.tokens or not most:
            continue
        whole = max(HEIGHT * got.tokens / most, 1.0)  # a day with any usage shows
        below = whole * got.input_tokens / got.tokens
        bars.append(
            Bar(
                x=n * SLOT + (SLOT - BAR) // 2,
                input_y=_units(HEIGHT - below),
                input_height=_units(below),
                output_y=_units(HEIGHT - whole),
                output_height=_units(whole - below),
                title=(
                    f"{day_shown(day)}: {got.input_tokens:,} input and "
                    f"{got.output_tokens:,} output tokens"
                ),
            )
        )
    return Chart(period.days * SLOT, HEIGHT, bars, most, summary(period, report))
