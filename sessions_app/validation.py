"""Checks on user-supplied values shared by the services."""

from __future__ import annotations

import re
from typing import Any

from .errors import InvalidInput
from .models import NAME_MAX_LENGTH

DESCRIPTION_MAX_LENGTH = 10_000


def clean_name(value: Any, *, what: str, default: str | None = None) -> str:
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
    if "\x00" in value:
        raise InvalidInput(f"The {what} name cannot contain NUL characters.")
    return value


def clean_description(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput("The description must be text.")
    if len(value) > DESCRIPTION_MAX_LENGTH:
        raise InvalidInput(
            f"The description is {len(value)} characters long; "
            f"the limit is {DESCRIPTION_MAX_LENGTH}."
        )
    return value.replace("\x00", "")


def clean_json_object(value: Any, *, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"The {what} must be a JSON object.")
    return value


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
