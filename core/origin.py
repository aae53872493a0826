"""Which browser tab made the change being published: the chat page tags its requests with its
tab's id, the view that answers with the page's new state names it here (`acting_tab`), and the
events published meanwhile carry it through the channel layer, so that tab's socket does not have
the page fetch what the answer already brought. Only the tab's own request sets it: a turn's
worker, a scheduled job or another request publishes with none."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_tab: ContextVar[str | None] = ContextVar("rollback_acting_tab", default=None)

# What a tab's id may look like (the page makes it: web/pages/chat.py).
TAB_ID = re.compile(r"[0-9a-f]{8,32}")


def clean_tab(value: object) -> str | None:
    """A tab's id as sent by a page (a header, the socket's query string), or None."""
    return value if isinstance(value, str) and TAB_ID.fullmatch(value) else None


@contextmanager
def acting_tab(tab: str | None) -> Iterator[None]:
    """Within this block, changes are the tab's own (None: nobody's)."""
    token = _tab.set(clean_tab(tab))
    try:
        yield
    finally:
        _tab.reset(token)


def current_tab() -> str | None:
    return _tab.get()
