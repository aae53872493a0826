"""Secrets kept encrypted at rest (an MCP server's header values, a user's own credentials for
one), with `cryptography`'s Fernet (AES-128-CBC with HMAC-SHA256, a maintained library).

The keys: ROLLBACK_ENCRYPTION_KEYS, comma-separated Fernet keys (`Fernet.generate_key()`); the
first encrypts, every one decrypts (MultiFernet), so a key is rotated by putting a new one first
and running `manage.py reseal` (every sealed value encrypted again under the first key), then
dropping the old one. Unset, one key is derived from SECRET_KEY (and one from each of
SECRET_KEY_FALLBACKS, so a rotated SECRET_KEY listed there still opens what the old one sealed):
an operator who sets nothing is safe as long as SECRET_KEY is secret; a database dump alone opens
nothing.

`SealedJSONField` keeps a JSON value (a dict of header names to values) as one Fernet token in a
text column: the Python side is the plain value, the column never holds it. A token no key opens
(a lost key) reads as the field's empty value, logged once per read (never the token): the
server's or the user's credentials must then be given again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models

log = logging.getLogger(__name__)

PREFIX = "sealed:"  # marks a sealed value, so a plain one (before the migration) is told apart


class SealBroken(Exception):
    """A sealed value that no configured key opens."""


def _derived(secret: str) -> bytes:
    digest = hashlib.sha256(f"rollback.sealed:{secret}".encode()).digest()
    return base64.urlsafe_b64encode(digest)


def _key_material() -> tuple[str, ...]:
    given = tuple(getattr(settings, "ROLLBACK_ENCRYPTION_KEYS", None) or ())
    if given:
        return given
    fallbacks = tuple(getattr(settings, "SECRET_KEY_FALLBACKS", None) or ())
    return tuple(_derived(s).decode() for s in (settings.SECRET_KEY, *fallbacks))


@lru_cache(maxsize=4)
def _fernet(material: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key.encode()) for key in material])


def fernet() -> MultiFernet:
    """The keys as they are configured now (settings may change in tests)."""
    return _fernet(_key_material())


def seal(text: str) -> str:
    return PREFIX + fernet().encrypt(text.encode()).decode()


def unseal(token: str) -> str:
    if not token.startswith(PREFIX):
        raise SealBroken("not a sealed value")
    try:
        return fernet().decrypt(token[len(PREFIX) :].encode()).decode()
    except (InvalidToken, ValueError):
        raise SealBroken("no configured key opens it") from None


def reseal(token: str) -> str:
    """The same value sealed under the first key (MultiFernet.rotate)."""
    if not token.startswith(PREFIX):
        raise SealBroken("not a sealed value")
    try:
        rotated = fernet().rotate(token[len(PREFIX) :].encode())
    except (InvalidToken, ValueError):
        raise SealBroken("no configured key opens it") from None
    return PREFIX + rotated.decode()


class SealedJSONField(models.TextField):  # type: ignore[type-arg]
    """A JSON value stored as one Fernet token (see the module's note)."""

    description = "JSON, encrypted at rest"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("blank", True)
        kwargs.setdefault("default", dict)
        super().__init__(*args, **kwargs)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None or value == "":
            return self.get_default()
        try:
            return json.loads(unseal(value))
        except (SealBroken, ValueError) as exc:
            model = getattr(self, "model", None)
            log.warning(
                "A sealed value of %s.%s cannot be read (%s); it reads as empty",
                getattr(model, "__name__", "?"),
                self.name,
                exc,
            )
            return self.get_default()

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and value.startswith(PREFIX):
            try:
                return json.loads(unseal(value))
            except (SealBroken, ValueError):
                return self.get_default()
        return value

    def get_prep_value(self, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str) and value.startswith(PREFIX):
            return value  # already sealed (a row copied as it is stored)
        return seal(json.dumps(value, ensure_ascii=False, sort_keys=True))

    def value_to_string(self, obj: models.Model) -> str:
        """What `dumpdata` (a backup) writes: the sealed token, never the value."""
        value = self.value_from_object(obj)
        prepared = self.get_prep_value(value)
        return "" if prepared is None else str(prepared)


def reseal_column(model: type[models.Model], field: str) -> tuple[int, int]:
    """Encrypt every sealed value of one column again under the first key, read and written
    as stored (a value no key opens is left as it is, never blanked). Returns (resealed,
    unreadable)."""
    from django.db import connection, transaction

    meta = model._meta
    table = connection.ops.quote_name(meta.db_table)
    concrete = meta.get_field(field)
    column = connection.ops.quote_name(getattr(concrete, "column", None) or field)
    pk = connection.ops.quote_name(
        meta.pk.column if meta.pk is not None and meta.pk.column else "id"
    )
    done = unreadable = 0
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SELECT {pk}, {column} FROM {table}")  # noqa: S608 - names from the model
        for key, token in cursor.fetchall():
            if not token:
                continue
            try:
                fresh = reseal(token)
            except SealBroken:
                unreadable += 1
                continue
            cursor.execute(f"UPDATE {table} SET {column} = %s WHERE {pk} = %s", [fresh, key])  # noqa: S608
            done += 1
    return done, unreadable
