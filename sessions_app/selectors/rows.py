"""History rows as they come from the database cursor, built into messages (or plain dicts)
without the ORM's per-instance cost."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypedDict

from django.conf import settings
from django.db import connection
from django.db.models import JSONField
from django.db.models.base import ModelState

from ..feedback import Feedback
from ..models import Message

# The columns a history row is read with, in the model's own order, and how each value comes
# back from the database cursor: the messages are built from them without Model.__init__ (which,
# with its descriptors and per-field converters, was most of the cost of reading a long history).
HISTORY_FIELDS = tuple(Message._meta.concrete_fields)
_JSON_ATTNAMES = frozenset(f.attname for f in HISTORY_FIELDS if isinstance(f, JSONField))


def json_value(value: Any) -> Any:
    # What JSONField.from_db_value gives, without a decoder call for the common empty cases.
    if value is None or not isinstance(value, str | bytes | bytearray):
        return value  # NULL, or a driver that decodes JSON itself
    if value == "{}":
        return {}
    return json.loads(value)


def messages_from_rows(rows: Iterable[Sequence[Any]]) -> list[Message]:
    """Message instances from history rows, as the ORM would build them (same attributes, values
    and state: saved, loaded from this database), built directly."""
    attnames = [f.attname for f in HISTORY_FIELDS]
    json_at = [i for i, name in enumerate(attnames) if name in _JSON_ATTNAMES]
    created_at = attnames.index("created_at")
    datetime_value = datetime_converter()
    alias = connection.alias
    new = Message.__new__
    out = []
    for row in rows:
        values = list(row)
        for i in json_at:
            values[i] = json_value(values[i])
        values[created_at] = datetime_value(values[created_at])
        message = new(Message)
        state = ModelState()
        state.adding = False
        state.db = alias
        message.__dict__.update(zip(attnames, values, strict=True))
        message._state = state
        out.append(message)
    return out


def datetime_converter() -> Callable[[Any], Any]:
    """How a DateTimeField value read by a raw cursor becomes what the ORM returns: the
    backend's converters, with a shortcut for their common case (the driver gave a naive
    datetime and times are stored in UTC: the converters would only attach the zone)."""
    field = Message._meta.get_field("created_at")
    converters = connection.ops.get_db_converters(field.get_col(Message._meta.db_table))
    if not converters:
        return lambda value: value
    zone = connection.timezone if settings.USE_TZ else None

    def convert(value: Any) -> Any:
        if zone is not None and type(value) is datetime and value.tzinfo is None:
            return value.replace(tzinfo=zone)
        for converter in converters:
            value = converter(value, field, connection)
        return value

    return convert


class HistoryRow(TypedDict):
    """One message of a history as the API shows it (web.api.serializers.MessageOut's fields,
    in its order): read straight from the cursor, no model instance built."""

    id: int
    position: int
    role: str
    content: str
    tool_name: str
    tool_args: Any
    tool_result: str
    tool_call_id: str
    tool_calls: Any
    effect: str | None  # a tool message's (none, workspace, external); None for other roles
    metadata: Any
    created_at: datetime
    feedback: Feedback | None  # an assistant message's rating (sessions_app.feedback), or None


ROW_FIELDS = (
    "id",
    "position",
    "role",
    "content",
    "tool_name",
    "tool_args",
    "tool_result",
    "tool_call_id",
    "tool_calls",
    "effect",
    "metadata",
    "created_at",
)


@contextmanager
def without_cyclic_gc() -> Iterator[None]:
    """Build many objects with Python's cycle collector paused. Ten thousand messages are tens
    of thousands of new containers, enough to set off the collector's passes over the whole
    heap (about 200,000 objects in a web or worker process): measured, every other read of a
    10,000-message history took 100+ ms more. The rows hold no reference cycles, so the
    collector misses nothing; it is switched back on as it was found."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
