"""Reads for the operator's dashboard: the site's totals, what each user keeps (sessions,
messages, storage, their workspaces' file versions and contents beside the quota, last
activity), the newest failed turns and the newest audit records.

Every read is one bounded query, whatever the number of users: per-user figures are correlated
subqueries on the users (never a join that multiplies rows). The totals and the users' figures
read every message, so they are cached for `USAGE_CACHE_SECONDS`; the failed turns and the audit
records are read live (each is the first rows of an index)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import (
    BigIntegerField,
    DateTimeField,
    Expression,
    F,
    Func,
    Max,
    Model,
    OuterRef,
    QuerySet,
    Subquery,
    Sum,
    TextField,
    Value,
)
from django.db.models.aggregates import Aggregate, Count
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from accounts.models import User
from checkpoints.models import Checkpoint
from sessions_app.models import Message, Session, Turn
from workspace.models import FileVersion, WorkspaceBlob
from workspace.quota import Quota, user_quota

from .models import AuditRecord

USERS_PER_PAGE = 50
NEWEST = 20
# The totals and the users' storage read every message: a page served within this many seconds
# of the last one that computed them shows the same figures.
USAGE_CACHE_SECONDS = 60
# The version in the key: a deployment that changes the cached figures' shape starts afresh.
_USAGE_CACHE_KEY = "ops:dashboard:usage:v2:{page}"
# The message's fields that hold its text, and those that hold JSON (counted as their JSON text).
MESSAGE_TEXT_FIELDS = ("content", "tool_result")
MESSAGE_JSON_FIELDS = ("tool_args", "tool_calls")


class OctetLength(Func):
    """The size of a text in bytes, as UTF-8 (Django's Length counts characters). PostgreSQL reads
    it from a stored value's header, without decompressing it."""

    function = "OCTET_LENGTH"
    output_field = BigIntegerField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler, connection, template="LENGTH(CAST(%(expressions)s AS BLOB))", **extra
        )


def _text_bytes(field: str) -> Coalesce:
    return Coalesce(OctetLength(F(field)), Value(0))


def _json_bytes(field: str) -> Coalesce:
    return Coalesce(OctetLength(Cast(field, TextField())), Value(0))


def message_bytes() -> Expression:
    """What one message takes, as the dashboard counts it: the bytes of its text and tool result
    and of its tool arguments and tool calls as JSON text."""
    parts = [_text_bytes(f) for f in MESSAGE_TEXT_FIELDS]
    parts += [_json_bytes(f) for f in MESSAGE_JSON_FIELDS]
    total: Expression = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _per_user(
    queryset: QuerySet[Any], owner_path: str, aggregate: Aggregate, output_field: Any
) -> Subquery:
    """One aggregate of the `queryset` rows that belong to the outer user (through
    `owner_path`), as a correlated subquery: one value per user, NULL when they have no row."""
    rows = (
        queryset.filter(**{owner_path: OuterRef("pk")})
        .order_by()
        .values(owner_path)
        .annotate(value=aggregate)
        .values("value")
    )
    return Subquery(rows, output_field=output_field)


def _count_per_user(model: type[Model], owner_path: str) -> Coalesce:
    counted = _per_user(model._default_manager.all(), owner_path, Count("pk"), BigIntegerField())
    return Coalesce(counted, Value(0))


def _sum_per_user(model: type[Model], owner_path: str, expression: Expression) -> Coalesce:
    summed = _per_user(model._default_manager.all(), owner_path, Sum(expression), BigIntegerField())
    return Coalesce(summed, Value(0))


def database_size() -> int | None:
    """The database's size on disk in bytes: PostgreSQL's `pg_database_size`, SQLite's pages
    (the main file, without its write-ahead log); None on another database."""
    if connection.vendor == "postgresql":
        sql = "SELECT pg_database_size(current_database())"
    elif connection.vendor == "sqlite":
        sql = "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
    else:
        return None
    with connection.cursor() as cursor:
        cursor.execute(sql)
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else None


@dataclass(frozen=True)
class Totals:
    users: int
    sessions: int
    messages: int
    checkpoints: int
    database_bytes: int | None


@dataclass(frozen=True)
class UserUsage:
    pk: int
    username: str
    sessions: int
    messages: int
    last_activity: datetime | None  # the newest change of any of their sessions
    message_bytes: int
    checkpoint_bytes: int
    # Their workspaces (workspace.quota): file versions kept, and bytes of the distinct file
    # contents each session stores.
    file_versions: int = 0
    file_bytes: int = 0

    @property
    def storage_bytes(self) -> int:
        return self.message_bytes + self.checkpoint_bytes + self.file_bytes


@dataclass(frozen=True)
class Usage:
    """The totals and one page of users, most storage first, as of `computed_at`."""

    totals: Totals
    page: int
    users: list[UserUsage]
    has_next: bool
    computed_at: datetime
    # The per-user workspace quota (0: none), shown beside each user's files.
    file_quota: Quota = field(default_factory=lambda: Quota(0, 0))

    @property
    def first_rank(self) -> int:
        return (self.page - 1) * USERS_PER_PAGE + 1


def site_totals() -> Totals:
    return Totals(
        users=User.objects.count(),
        sessions=Session.objects.count(),
        messages=Message.objects.count(),
        checkpoints=Checkpoint.objects.count(),
        database_bytes=database_size(),
    )


def users_by_storage(*, page: int = 1) -> tuple[list[UserUsage], bool]:
    """One page of users, most storage first (then oldest account first), with their counts; and
    whether another page follows. One query: each figure is a correlated subquery."""
    offset = (page - 1) * USERS_PER_PAGE
    owner = "branch__session__owner"
    rows = (
        User.objects.annotate(
            message_bytes=_sum_per_user(Message, owner, message_bytes()),
            checkpoint_bytes=_sum_per_user(Checkpoint, owner, _json_bytes("session_state")),
            file_bytes=_sum_per_user(
                WorkspaceBlob, "session__owner", Coalesce(F("size"), Value(0))
            ),
            file_versions=_count_per_user(FileVersion, owner),
            storage=F("message_bytes") + F("checkpoint_bytes") + F("file_bytes"),
            session_count=_count_per_user(Session, "owner"),
            message_count=_count_per_user(Message, owner),
            last_activity=_per_user(
                Session.objects.all(), "owner", Max("updated_at"), DateTimeField()
            ),
        )
        .order_by("-storage", "pk")
        .values(
            "pk",
            "username",
            "session_count",
            "message_count",
            "last_activity",
            "message_bytes",
            "checkpoint_bytes",
            "file_versions",
            "file_bytes",
        )[offset : offset + USERS_PER_PAGE + 1]
    )
    users = [
        UserUsage(
            pk=row["pk"],
            username=row["username"],
            sessions=row["session_count"],
            messages=row["message_count"],
            last_activity=row["last_activity"],
            # int(): PostgreSQL's SUM of big integers is a numeric (a Decimal in Python).
            message_bytes=int(row["message_bytes"]),
            checkpoint_bytes=int(row["checkpoint_bytes"]),
            file_versions=int(row["file_versions"]),
            file_bytes=int(row["file_bytes"]),
        )
        for row in rows
    ]
    return users[:USERS_PER_PAGE], len(users) > USERS_PER_PAGE


def usage(*, page: int = 1) -> Usage:
    """The totals and a page of users by storage, computed at most once per
    `USAGE_CACHE_SECONDS` for each page (shared by every operator who may see them)."""
    key = _USAGE_CACHE_KEY.format(page=page)
    cached = cache.get(key)
    if isinstance(cached, Usage):
        return cached
    users, has_next = users_by_storage(page=page)
    figures = Usage(
        totals=site_totals(),
        page=page,
        users=users,
        has_next=has_next,
        computed_at=timezone.now(),
        file_quota=user_quota(),
    )
    cache.set(key, figures, USAGE_CACHE_SECONDS)
    return figures


def newest_failed_turns(*, limit: int = NEWEST) -> list[Turn]:
    """The newest failed turns with their session and its owner (the first rows of the
    `turn_failed_newest` index); only what the dashboard shows is read."""
    return list(
        Turn.objects.filter(status=Turn.Status.FAILED)
        .select_related("session__owner")
        .only(
            "id",
            "error",
            "created_at",
            "finished_at",
            "session__id",
            "session__session_name",
            "session__owner__id",
            "session__owner__username",
        )
        .order_by("-finished_at", "-id")[:limit]
    )


def newest_audit_records(*, limit: int = NEWEST) -> list[AuditRecord]:
    """The newest audit records with who started them; their parameters and details (an erasure's
    lists of ids) are not read."""
    return list(
        AuditRecord.objects.select_related("actor")
        .defer("parameters", "details")
        .order_by("-started_at", "-id")[:limit]
    )
