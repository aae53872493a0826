"""A thread done with the database for now gives its connection back (`release_connection`).

PostgreSQL's connections are lent by the process's pool (psycopg's, DATABASE_POOL_SIZE): one
kept by a thread that waits (on the model, on a turn, between turns) is one the others cannot
borrow, so it goes back (measured with 50 turns at once in a worker of 50 threads: holding
theirs through the model's stream, the turns held every connection of the pool and the others
failed after DATABASE_POOL_TIMEOUT). SQLite has no pool: each thread keeps its one connection
for its life (CONN_MAX_AGE None), and closing it only made the thread open it again (connecting
and its pragmas, about a millisecond, and the close itself as much): it is kept, unless it
broke.
"""

from __future__ import annotations

from typing import TypeVar

from django.db import connection
from django.db.models import Field, Model, QuerySet

M = TypeVar("M", bound=Model)


def release_connection() -> None:
    """Give this thread's connection back to the pool (PostgreSQL), or keep it for the thread's
    next query when it works (SQLite). Nothing inside a transaction."""
    if connection.in_atomic_block:
        return
    if connection.settings_dict.get("OPTIONS", {}).get("pool"):
        connection.close()
    else:
        connection.close_if_unusable_or_obsolete()


def quoted_column(model: type[Model], name: str) -> str:
    """A model field's column, quoted for raw SQL on the default connection (`name` "pk" for the
    primary key's)."""
    field = model._meta.pk if name == "pk" else model._meta.get_field(name)
    column = field.column if isinstance(field, Field) else None
    if not column:
        raise TypeError(f"{model.__name__}.{name} has no column")
    return connection.ops.quote_name(column)


def quoted_table(model: type[Model]) -> str:
    """A model's table, quoted for raw SQL on the default connection."""
    return connection.ops.quote_name(model._meta.db_table)


def one_row(rows: QuerySet[M]) -> M | None:
    """The row of a queryset that matches at most one (by its key, or a unique index), or None:
    read with LIMIT 1 and no ORDER BY (`first()` would order by the model's ordering, which
    only costs compiling for one row)."""
    return next(iter(rows.order_by()[:1]), None)
