"""Checks on user-supplied values shared by the services."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias

from django.conf import settings
from django.db.models import CheckConstraint, Q

from core.errors import InvalidInput, TooLarge

# The longest name of a session, a branch or a checkpoint (the columns are this wide).
NAME_MAX_LENGTH = 200
DESCRIPTION_MAX_LENGTH = 10_000
# The longest search a list accepts (longer text is cut to this).
SEARCH_MAX_LENGTH = 200

# How deep a JSON value from a user (metadata, session state, tool arguments) may nest. A whole
# document that carries such values (a request body, an imported export, where a checkpoint's
# state sits five levels down) may nest a few levels more. Anything deeper is refused before
# Python's recursion limit can turn it into a server error, here or in any code reading it later.
JSON_MAX_DEPTH = 32
DOCUMENT_MAX_DEPTH = JSON_MAX_DEPTH + 8

# Every stored time lies in [TIME_MIN, TIME_MAX): far from the years 1 and 9999, the limits of
# Python's datetime, so no time zone can carry a stored time out of what Python can read back
# (a page listing it would fail for good). A CHECK constraint (`time_in_range`) holds every time
# column a user can influence to this range, whatever path writes it.
TIME_MIN = datetime(1970, 1, 1, tzinfo=UTC)
TIME_MAX = datetime(2100, 1, 1, tzinfo=UTC)
# How far in the future a time given by a user (in an imported export) may lie: clock skew.
TIME_FUTURE_SLACK = timedelta(days=1)

# A JSON object from a user or a model (metadata, session state, tool arguments): its shape is
# theirs, checked by `clean_json`, so its values are any JSON.
JSONObject: TypeAlias = dict[str, Any]

_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(value: str, *, what: str) -> None:
    """Text a database cannot store is refused: NUL (PostgreSQL refuses it in text and JSON) and
    lone surrogates (not encodable as UTF-8)."""
    if "\x00" in value:
        raise InvalidInput(f"The {what} cannot contain NUL characters.")
    if _SURROGATE.search(value):
        raise InvalidInput(
            f"The {what} cannot contain lone surrogates (U+D800 to U+DFFF): they are not "
            "valid Unicode."
        )


def clean_name(value: object, *, what: str, default: str | None = None) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidInput(f"The {what} name must be text.")
    value = value.strip()
    if not value:
        if default is None:
            raise InvalidInput(f"The {what} name cannot be empty.")
        value = default
    if len(value) > NAME_MAX_LENGTH:
        raise InvalidInput(
            f"The {what} name is {len(value)} characters long; the limit is {NAME_MAX_LENGTH}."
        )
    check_text(value, what=f"{what} name")
    return value


def clean_description(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput("The description must be text.")
    if len(value) > DESCRIPTION_MAX_LENGTH:
        raise InvalidInput(
            f"The description is {len(value)} characters long; "
            f"the limit is {DESCRIPTION_MAX_LENGTH}."
        )
    return storable_text(value)


def clean_search(value: object) -> str:
    """A search typed by a user: trimmed, cut to SEARCH_MAX_LENGTH; NUL is refused (no stored
    text holds one, and PostgreSQL refuses it in a query)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput("The search must be text.")
    value = value.strip()[:SEARCH_MAX_LENGTH]
    check_text(value, what="search")
    return value


# --- JSON from users ------------------------------------------------------------------------


def json_too_deep(value: Any, limit: int) -> bool:
    """Whether `value` nests lists and objects more than `limit` levels deep (`{}` is one level).
    Walks without recursion, so any depth is safe to ask about."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def lone_surrogate_at(value: Any) -> str | None:
    """Where the first lone surrogate (U+D800 to U+DFFF: not valid Unicode, and no UTF-8 text
    can hold one) sits in a JSON value, keys included: a path such as `metadata.note`, `[2]`
    or `(the value)`; None when there is none. Walks without recursion."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return path or "(the value)"
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and _SURROGATE.search(key):
                    return where
                children.append((child, where))
            stack.extend(reversed(children))  # in the document's order
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(child, f"{path}[{i}]") for i, child in enumerate(item)]))
    return None


def _check_json(value: Any, *, what: str) -> None:
    """Refuse what is not plain JSON a database can store: nesting deeper than JSON_MAX_DEPTH,
    NaN and infinite numbers, keys that are not text, other Python types, and NUL and lone
    surrogates in strings and keys."""
    if json_too_deep(value, JSON_MAX_DEPTH):
        raise InvalidInput(f"The {what} is nested more than {JSON_MAX_DEPTH} levels deep.")
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            check_text(item, what=what)
        elif isinstance(item, bool | int) or item is None:
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidInput(f"The {what} cannot contain NaN or infinite numbers.")
        elif isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    raise InvalidInput(f"The {what} can only have text keys.")
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        else:
            raise InvalidInput(f"The {what} must be JSON; it holds a {type(item).__name__}.")


def json_size(value: Any) -> int:
    """How many bytes `value` takes as compact JSON (UTF-8): what the size limits measure."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def clean_json(value: Any, *, what: str, max_bytes: int | None = None) -> Any:
    """Any JSON value from a user, checked (see `_check_json`) and, with `max_bytes`, no larger
    than that as JSON (TooLarge)."""
    _check_json(value, what=what)
    if max_bytes is not None:
        size = json_size(value)
        if size > max_bytes:
            raise TooLarge(f"The {what} is {size} bytes as JSON; the limit is {max_bytes} bytes.")
    return value


def clean_json_object(
    value: Any, *, what: str, max_bytes: int | None = None, model_output: bool = False
) -> JSONObject:
    """A JSON object (None is an empty one), checked like `clean_json`. With `model_output`,
    text a database cannot store is cleaned (`storable_json`) instead of refused: what a model
    wrote is kept as well as it can be, what a user sends is refused with the reason."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"The {what} must be a JSON object.")
    if model_output:
        if json_too_deep(value, JSON_MAX_DEPTH):  # the cleaning recurses: depth first
            raise InvalidInput(f"The {what} is nested more than {JSON_MAX_DEPTH} levels deep.")
        value = storable_json(value)
    checked: JSONObject = clean_json(value, what=what, max_bytes=max_bytes)
    return checked


def clean_metadata(value: Any, *, what: str) -> JSONObject:
    """The metadata of a session, a branch, a checkpoint or a message: a JSON object of at most
    ROLLBACK_METADATA_MAX_BYTES."""
    return clean_json_object(value, what=what, max_bytes=settings.ROLLBACK_METADATA_MAX_BYTES)


def clean_session_state(
    value: Any, *, what: str = "session state", model_output: bool = False
) -> JSONObject:
    """A branch's (or checkpoint's) session state: a JSON object of at most
    ROLLBACK_STATE_MAX_BYTES. Every checkpoint copies it, so it must stay small."""
    return clean_json_object(
        value, what=what, max_bytes=settings.ROLLBACK_STATE_MAX_BYTES, model_output=model_output
    )


# --- Times ----------------------------------------------------------------------------------


def clean_past_time(value: datetime, *, what: str) -> datetime:
    """A time given by a user for something that already happened (an imported message, say):
    between TIME_MIN and a day from now. A time without a zone is taken as UTC."""
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.replace(tzinfo=UTC)
    latest = datetime.now(UTC) + TIME_FUTURE_SLACK
    if not TIME_MIN <= value <= latest:
        raise InvalidInput(
            f"The {what} ({value.isoformat()}) is out of range: times must lie between "
            f"{TIME_MIN:%Y-%m-%d} and tomorrow."
        )
    return value


def time_in_range(field: str, *, name: str, null: bool = False) -> CheckConstraint:
    """The database's guarantee that `field` lies in [TIME_MIN, TIME_MAX) (or is NULL, with
    `null`), whatever path writes it. One constraint per column, so that a form editing the
    column (the admin's) checks it and shows the error beside the others."""
    condition = Q(**{f"{field}__gte": TIME_MIN, f"{field}__lt": TIME_MAX})
    if null:
        condition |= Q(**{f"{field}__isnull": True})
    return CheckConstraint(
        condition=condition,
        name=name,
        violation_error_message=(
            f"The time in {field} must lie between {TIME_MIN:%Y-%m-%d} and "
            f"{TIME_MAX - timedelta(days=1):%Y-%m-%d} (UTC)."
        ),
    )


# --- Model output ---------------------------------------------------------------------------

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable_char(match: re.Match[str]) -> str:
    return "" if match.group() == "\x00" else "\ufffd"


def storable_text(value: str) -> str:
    """`value` without what no database can store as text: NUL is dropped (PostgreSQL refuses it
    in text and JSON), a lone surrogate (not encodable as UTF-8) becomes U+FFFD."""
    return _UNSTORABLE.sub(_storable_char, value) if _UNSTORABLE.search(value) else value


def storable_json(value: Any) -> Any:
    """A JSON value with `storable_text` applied to every string in it, keys included."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {
            (storable_text(k) if isinstance(k, str) else k): storable_json(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [storable_json(v) for v in value]
    return value
