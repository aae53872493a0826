"""Checks on the fields of a memory, whoever sends them (a form, the API, the agent's tools).
Every failure is an InvalidInput (400) naming the field, or TooLarge (413) for details over
MEMORY_L2_MAX_CHARS."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TypedDict, cast

from django.conf import settings

from core.errors import InvalidInput, TooLarge
from core.validation import storable_text

from .models import KEY_MAX_LENGTH, L0_MAX_LENGTH, L1_MAX_LENGTH, Category

# A key is a short identifier: letters, digits, `_`, `.` and `-`, starting with a letter or a
# digit. It is kept in lower case, so "Editor" and "editor" are one key.
_KEY = re.compile(r"^[^\W_][\w.-]*$")
_CATEGORIES = {c.value.lower(): c.value for c in Category}


def _text(value: object, *, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"The {what} must be text.")
    _refuse_unstorable(value, what=what)
    return value


def _refuse_unstorable(value: str, *, what: str) -> None:
    if storable_text(value) != value:
        raise InvalidInput(
            f"The {what} cannot contain NUL characters or lone surrogates (U+D800 to U+DFFF)."
        )


def clean_key(value: object) -> str:
    key = _text(value, what="key").strip().lower()
    if not key:
        raise InvalidInput("The key cannot be empty.")
    if len(key) > KEY_MAX_LENGTH:
        raise InvalidInput(f"The key is {len(key)} characters long; the limit is {KEY_MAX_LENGTH}.")
    if not _KEY.match(key):
        raise InvalidInput(
            "The key must be a short identifier: letters, digits, '_', '.' and '-', starting "
            f"with a letter or a digit (got {key[:40]!r})."
        )
    return key


def clean_category(value: object) -> str:
    """One of the six categories; the case does not matter ("project" is Project)."""
    text = _text(value, what="category").strip()
    try:
        return _CATEGORIES[text.lower()]
    except KeyError:
        raise InvalidInput(
            f"Unknown category {text[:40]!r}: use one of {', '.join(Category.values)}."
        ) from None


def clean_l0(value: object) -> str:
    text = " ".join(_text(value, what="summary").split())  # one line
    if not text:
        raise InvalidInput("The summary (one line) cannot be empty.")
    if len(text) > L0_MAX_LENGTH:
        raise InvalidInput(
            f"The summary is {len(text)} characters long; the limit is {L0_MAX_LENGTH} "
            "(one line): put the rest in the overview or the details."
        )
    return text


def clean_l1(value: object) -> str:
    if value is None:
        return ""
    text = _text(value, what="overview").strip()
    if len(text) > L1_MAX_LENGTH:
        raise InvalidInput(
            f"The overview is {len(text)} characters long; the limit is {L1_MAX_LENGTH} "
            "(two or three sentences): put the rest in the details."
        )
    return text


def clean_l2(value: object) -> str:
    if value is None:
        return ""
    text = _text(value, what="details").strip()
    limit = settings.MEMORY_L2_MAX_CHARS
    if len(text) > limit:
        raise TooLarge(f"The details are {len(text)} characters long; the limit is {limit}.")
    return text


def clean_confidence(value: object) -> float:
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput("The confidence must be a number between 0 and 1.")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidInput("The confidence must be a number between 0 and 1.")
    return number


CLEANERS = {
    "key": clean_key,
    "category": clean_category,
    "l0_abstract": clean_l0,
    "l1_overview": clean_l1,
    "l2_details": clean_l2,
    "confidence": clean_confidence,
}
EDITABLE = tuple(CLEANERS)


class MemoryFields(TypedDict, total=False):
    """The fields of a memory, cleaned (those given)."""

    key: str
    category: str
    l0_abstract: str
    l1_overview: str
    l2_details: str
    confidence: float


def clean_fields(fields: Mapping[str, object]) -> MemoryFields:
    """The given fields of a memory, each cleaned; any other name is refused."""
    unknown = sorted(set(fields) - set(CLEANERS))
    if unknown:
        raise InvalidInput(f"Unknown memory field: {', '.join(unknown)}.")
    cleaned: dict[str, object] = {}
    for name, value in fields.items():
        try:
            cleaned[name] = CLEANERS[name](value)
        except InvalidInput as exc:
            exc.field = name  # type: ignore[attr-defined]  # a form shows it beside the field
            raise
    return cast(MemoryFields, cleaned)  # each name was checked against CLEANERS
