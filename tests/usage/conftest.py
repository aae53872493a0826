"""Usage recorded as the worker records it: through real turns answered by the fake model server,
or, for figures of other days and models, through the one write of usage (usage.services); and
the chat header's usage read back from a page."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from html.parser import HTMLParser

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


class _Text(HTMLParser):
    """The text of the element marked data-testid=`testid` (None when there is none)."""

    def __init__(self, testid: str) -> None:
        super().__init__()
        self.testid, self.depth, self.text = testid, 0, None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.depth:
            self.depth += 1
        elif ("data-testid", self.testid) in attrs:
            self.depth, self.text = 1, ""

    def handle_endtag(self, tag: str) -> None:
        if self.depth:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth and self.text is not None:
            self.text += data


def header_usage(html: str) -> str | None:
    """The words of the chat header's usage in a page (None when it shows none)."""
    parser = _Text("conversation-usage")
    parser.feed(html)
    return parser.text
