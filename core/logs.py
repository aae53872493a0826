"""Structured logs: who and what a log line is about, on every line.

The ids of the work in hand (the request, the user, the session, the turn) live in context
variables. `bound(...)` sets them for a block of code (a request, a turn run by a worker) and
puts back what was there before; `bind(...)` sets them until the enclosing `bound` block ends
(the API knows its user only once DRF has read the bearer key, inside the view). asgiref copies
the context into the threads where Django runs sync code under ASGI, and back; a thread started
by the code itself starts empty, so such threads run in a copy of the starter's context
(`in_this_context`).

`ContextFilter`, on the handler, copies the ids onto every record; the formatters show them:
`TextFormatter` (LOG_FORMAT=text, the default) as `key=value` after the message, `JsonFormatter`
(LOG_FORMAT=json) as fields of one JSON object per line. Both show a record's other structured
fields (`extra=`) the same way, and time in ISO 8601, UTC. settings.LOGGING wires them up.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter as BaseJsonFormatter

FIELDS = ("request_id", "user_id", "session_id", "turn_id")

_vars: dict[str, contextvars.ContextVar[Any]] = {
    name: contextvars.ContextVar(f"rollback_log_{name}", default=None) for name in FIELDS
}

# Attributes of every LogRecord, and those that loggers add for their own formatting (Django's
# `request`, an HttpRequest): never shown as fields of their own.
_NOT_FIELDS = frozenset([*RESERVED_ATTRS, "taskName", "message", "asctime", "request"])

P = ParamSpec("P")
R = TypeVar("R")


def _check(ids: dict[str, Any]) -> None:
    unknown = set(ids) - set(FIELDS)
    if unknown:
        raise TypeError(f"not a log context field: {', '.join(sorted(unknown))}")


@contextmanager
def bound(**ids: Any) -> Iterator[None]:
    """Set the given ids (None clears one) for the block, and put back the values they had
    before when it ends, whatever `bind` did inside it."""
    _check(ids)
    tokens = [(_vars[name], _vars[name].set(value)) for name, value in ids.items()]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def bind(**ids: Any) -> None:
    """Set the given ids until the enclosing `bound` block ends (which resets them)."""
    _check(ids)
    for name, value in ids.items():
        _vars[name].set(value)


def current() -> dict[str, Any]:
    """The ids set now (those that are not None)."""
    values = {name: _vars[name].get() for name in FIELDS}
    return {name: value for name, value in values.items() if value is not None}


def in_this_context(target: Callable[P, R]) -> Callable[P, R]:
    """`target`, to run in a copy of the current context: for a thread the code starts itself
    (threading.Thread and a plain executor start from an empty context)."""
    return functools.partial(contextvars.copy_context().run, target)


class ContextFilter(logging.Filter):
    """Copies the ids bound where the record was made onto it (a value the call gave with
    `extra=` wins). Django logs a request's 4xx and 5xx answers after the middleware has
    finished, with the request on the record: its id comes from there."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in current().items():
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        if getattr(record, "request_id", None) is None:
            request_id = getattr(getattr(record, "request", None), "request_id", None)
            if request_id is not None:
                record.request_id = request_id
        return True


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The record's structured fields: its ids first, then what the call gave with `extra=`."""
    extra = {
        key: value
        for key, value in record.__dict__.items()
        if key not in _NOT_FIELDS and not key.startswith("_")
    }
    ordered = {name: extra.pop(name) for name in FIELDS if extra.get(name) is not None}
    return {**ordered, **extra}


def _utc_iso(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds")


def _text_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text and not any(c.isspace() or c in '"=' for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message key=value ...`: the ids and the other fields after the
    message, a value with spaces in quotes; a traceback on the lines below, as usual."""

    def __init__(self, fmt: str | None = None, **kwargs: Any) -> None:
        super().__init__(fmt or "%(asctime)s %(levelname)s %(name)s: %(message)s", **kwargs)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _utc_iso(record)

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        pairs = " ".join(f"{k}={_text_value(v)}" for k, v in fields_of(record).items())
        return f"{text} {pairs}" if pairs else text


class JsonFormatter(BaseJsonFormatter):
    """One JSON object per line: `timestamp` (ISO 8601, UTC), `level`, `logger`, `message`, the
    ids, the other fields, and `exc_info` (the traceback, as one string) when there is one."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("reserved_attrs", sorted(_NOT_FIELDS))
        super().__init__(**kwargs)

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        log_data["timestamp"] = _utc_iso(record)
        log_data["level"] = record.levelname
        log_data["logger"] = record.name
        log_data["message"] = record.message
        log_data.update(fields_of(record))
        log_data.update(message_dict)
