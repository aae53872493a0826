"""Reads of sessions, branches and messages. Every lookup of a user's object starts from the user:
another user's object is reported exactly like a missing one."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from django.conf import settings
from django.db import connection
from django.db.models import (
    Count,
    Exists,
    F,
    IntegerField,
    JSONField,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.base import ModelState
from django.db.models.functions import Coalesce

from accounts.models import ApiKey, User

from .errors import BranchNotFound, SessionNotFound, TurnNotFound
from .models import Branch, Message, Session, Summary, Turn
from .search import SnippetPart, search_history, search_sessions, snippet

if TYPE_CHECKING:
    from .models import AnyUser


def parse_pk(value: Any) -> int | None:
    # Untrusted input of any type (a URL part, a query parameter, JSON): int() decides.
    try:
        pk = int(value)
    except (TypeError, ValueError):
        return None
    return pk if 0 < pk < 2**63 else None


def get_session_for_user(user: AnyUser, pk: object) -> Session:
    key = parse_pk(pk)
    if key is None:
        raise SessionNotFound()
    try:
        return Session.objects.for_user(user).get(pk=key)
    except Session.DoesNotExist:
        raise SessionNotFound() from None


def watch_access(
    *, user_id: int, session_id: int, api_key_id: int | None = None
) -> Literal["ok", "signed_out", "not_found"]:
    """Whether whoever watches a session's events (a socket) may still hear them, in one query:
    "signed_out" when the user is no longer active (or gone) or the API key the socket was
    opened with is revoked, "not_found" when the session is no longer the user's (deleted, or
    given to someone else)."""
    users = User.objects.filter(pk=user_id, is_active=True)
    if api_key_id is not None:
        keys = ApiKey.objects.active().filter(pk=api_key_id, user=OuterRef("pk"))
        users = users.filter(Exists(keys))
    owned = Session.objects.filter(pk=session_id, owner=OuterRef("pk"))
    owns = users.annotate(owns=Exists(owned)).values_list("owns", flat=True).first()
    if owns is None:
        return "signed_out"
    return "ok" if owns else "not_found"


def get_branch_for_user(user: AnyUser, pk: object) -> Branch:
    key = parse_pk(pk)
    if key is None:
        raise BranchNotFound()
    try:
        return Branch.objects.for_user(user).select_related("session").get(pk=key)
    except Branch.DoesNotExist:
        raise BranchNotFound() from None


def get_turn_for_user(user: AnyUser, pk: object, *, session: Session | None = None) -> Turn:
    """One of the user's turns (of `session`, when given)."""
    key = parse_pk(pk)
    if key is None:
        raise TurnNotFound()
    turns = Turn.objects.for_user(user).select_related("user_message", "reply_message")
    if session is not None:
        turns = turns.filter(session=session)
    try:
        return turns.get(pk=key)
    except Turn.DoesNotExist:
        raise TurnNotFound() from None


def sessions_for_user(user: AnyUser) -> QuerySet[Session]:
    return Session.objects.for_user(user).order_by("-created_at", "-id")


SESSION_ORDERS = {
    "created": ("-created_at", "-id"),
    "activity": ("-updated_at", "-id"),
}


def sessions_listed(
    user: AnyUser,
    *,
    query: str = "",
    archived: bool = False,
    order: str = "created",
    session_key: str | None = None,
    pinned: bool | None = None,
) -> QuerySet[Session]:
    """The user's sessions as lists show them: the archived ones or the others, matching `query`
    (names, session keys and message text, see sessions_app/search.py), with `session_key`
    only the session of that exact key, with `pinned` only the pinned ones (or only the others),
    newest first by creation or, with order="activity", most recently active first."""
    sessions = Session.objects.for_user(user)
    sessions = sessions.filter(archived_at__isnull=not archived)
    if session_key is not None:
        sessions = sessions.filter(session_key=session_key)
    if pinned is not None:
        sessions = sessions.filter(pinned_at__isnull=not pinned)
    return search_sessions(sessions, query).order_by(*SESSION_ORDERS[order])


def sessions_sidebar(
    user: AnyUser, *, query: str = "", archived: bool = False
) -> QuerySet[Session]:
    """The user's sessions as the chat page's sidebar lists them: the pinned ones first (the
    last pinned on top), then the others, most recently active first."""
    listed = sessions_listed(user, query=query, archived=archived, order="activity")
    return listed.order_by(F("pinned_at").desc(nulls_last=True), "-updated_at", "-id")


class ConversationHit(TypedDict):
    """A message found by a search inside one conversation, with its snippet."""

    message: Message
    snippet: list[SnippetPart]


def conversation_hits(session: Session, query: str) -> list[ConversationHit]:
    """The messages of the session's current branch history that match `query` (see
    sessions_app/search.py), newest first, each with a snippet around the match: two queries."""
    branch = current_branch(session)
    found = search_history(branch, branch_lineage(branch), query)
    return [{"message": m, "snippet": snippet(m.content or m.tool_result, query)} for m in found]


def sessions_idle(*, since: datetime) -> QuerySet[Session]:
    """Sessions nobody has touched since `since` (no message, turn, rename or other change: their
    `updated_at` is older), not archived, with no turn queued or running."""
    return (
        Session.objects.active()
        .filter(updated_at__lt=since)
        .exclude(Exists(Turn.objects.active().filter(session=OuterRef("pk"))))
    )


def with_branch_summary(sessions: QuerySet[Session]) -> QuerySet[Session]:
    """Each session with `branch_count` and `current_branch_id`, in the same query."""
    branches = Branch.objects.filter(session=OuterRef("pk")).order_by()
    return sessions.annotate(
        branch_count=Coalesce(
            Subquery(
                branches.values("session").annotate(n=Count("pk")).values("n"),
                output_field=IntegerField(),
            ),
            Value(0),
        ),
        current_branch_id=Subquery(branches.filter(is_current=True).values("pk")[:1]),
    )


def current_branch(session: Session) -> Branch:
    try:
        return Branch.objects.select_related("session").get(session=session, is_current=True)
    except Branch.DoesNotExist:
        raise BranchNotFound("This session has no current branch.") from None


def session_branches(session: Session) -> QuerySet[Branch]:
    return Branch.objects.filter(session=session).order_by("created_at", "id")


def session_branches_with_forks(session: Session) -> list[Branch]:
    """The session's branches, oldest first, with the checkpoints they were restored from: one
    query, for the labels, the tree and the versions of messages."""
    return list(session_branches(session).select_related("forked_from"))


def latest_session_for_user(user: AnyUser) -> Session | None:
    """The user's most recently active session that is not archived (the chat's home)."""
    return sessions_listed(user, order="activity").first()


def session_with_summary_for_user(user: AnyUser, pk: int) -> Session | None:
    """The user's session `pk` with its `branch_count` and `current_branch_id`, or None."""
    return with_branch_summary(sessions_for_user(user)).filter(pk=pk).first()


def active_turn(session: Session) -> Turn | None:
    """The session's turn that is queued, running or awaiting an approval, if any."""
    return Turn.objects.filter(session=session).active().order_by("-created_at").first()


def last_turn(session: Session) -> Turn | None:
    """The session's latest turn, with the checkpoint it rolled back to."""
    return (
        Turn.objects.filter(session=session)
        .select_related("rolled_back_to")
        .order_by("-created_at", "-id")
        .first()
    )


def turn_reloaded(turn: Turn) -> Turn | None:
    """The turn as it now stands, with its user message and reply (None once deleted)."""
    return Turn.objects.select_related("user_message", "reply_message").filter(pk=turn.pk).first()


def message_for_user(
    user: AnyUser, session: Session, pk: object, *, role: str | None = None
) -> Message | None:
    """The user's message `pk` of any branch of `session` (of that `role` when given), with its
    branch; None when it is missing, another session's or another user's."""
    key = parse_pk(pk)
    if key is None:
        return None
    messages = Message.objects.for_user(user).filter(pk=key, branch__session=session)
    if role is not None:
        messages = messages.filter(role=role)
    return messages.select_related("branch__session").first()


def message_place(user: AnyUser, session: Session, pk: object) -> tuple[int, int] | None:
    """Where the user's message `pk` of `session` sits: its branch's id and its position; None
    when it is missing, another session's or another user's. One query, no message loaded."""
    key = parse_pk(pk)
    if key is None:
        return None
    found = (
        Message.objects.for_user(user)
        .filter(pk=key, branch__session=session)
        .values_list("branch_id", "position")
        .first()
    )
    return (found[0], found[1]) if found is not None else None


def _lineage_cte() -> str:
    q = connection.ops.quote_name
    branches = q(Branch._meta.db_table)
    # The lineage walks from the branch up through its parents. Each ancestor contributes its
    # messages below the fork position of the branch under it (capped by the bound carried from
    # below), so positions are distinct across the lineage and ORDER BY position is the history.
    return f"""
        WITH RECURSIVE lineage(id, parent_id, fork_position, upper) AS (
            SELECT id, parent_id, fork_position, CAST(%s AS INTEGER)
            FROM {branches} WHERE id = %s
            UNION ALL
            SELECT p.id, p.parent_id, p.fork_position,
                   CASE WHEN l.fork_position < l.upper THEN l.fork_position ELSE l.upper END
            FROM {branches} p JOIN lineage l ON p.id = l.parent_id
        )
    """  # noqa: S608 - quoted names and constants; values are parameters


def branch_lineage(branch: Branch, *, end: int | None = None) -> list[tuple[int, int]]:
    """The branches whose messages make up the branch's history below `end`, each with the
    position below which its messages belong to that history: (branch id, upper bound)."""
    stop = branch.message_count if end is None else max(0, min(end, branch.message_count))
    with connection.cursor() as cursor:
        cursor.execute(_lineage_cte() + "SELECT id, upper FROM lineage", [stop, branch.pk])  # noqa: S608 - quoted names and constants; values are parameters
        return [(int(row[0]), int(row[1])) for row in cursor.fetchall()]


def common_length(
    a: Branch, b: Branch, *, a_end: int | None = None, b_end: int | None = None
) -> int:
    """How many messages the histories of `a` (below `a_end`) and `b` (below `b_end`) share
    from their start: the same rows, since histories form a tree. Two lineage reads."""
    ours = dict(branch_lineage(a, end=a_end))
    shared = [min(upper, ours[pk]) for pk, upper in branch_lineage(b, end=b_end) if pk in ours]
    return max(shared, default=0)


def history_effects(branch: Branch, *, start: int = 0, effect: str = "external") -> list[Message]:
    """The tool messages of `effect` in the branch's history from position `start`, oldest
    first: one query, no other message loaded."""
    stop = branch.message_count
    if max(0, start) >= stop:
        return []
    q = connection.ops.quote_name
    messages = q(Message._meta.db_table)
    columns = ", ".join(f"m.{q(f.column or f.attname)}" for f in _HISTORY_FIELDS)
    sql = (
        _lineage_cte()  # noqa: S608 - quoted names and constants; values are parameters
        + f"""
        SELECT {columns} FROM {messages} m JOIN lineage l ON m.branch_id = l.id
        WHERE m.position < l.upper AND m.position >= %s AND m.role = 'tool' AND m.effect = %s
        ORDER BY m.position
    """  # noqa: S608 - quoted names and constants; values are parameters
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [stop, branch.pk, max(0, start), effect])
        return _messages_from_rows(cursor.fetchall())


def lineage_summary(branch: Branch, *, end: int | None = None) -> Summary | None:
    """The summary of the longest prefix of the branch's history below `end` that has one. One
    query: the summaries keyed by a message of the lineage, below each branch's bound."""
    stop = branch.message_count if end is None else max(0, min(end, branch.message_count))
    if stop <= 0:
        return None
    q = connection.ops.quote_name
    summaries = q(Summary._meta.db_table)
    messages = q(Message._meta.db_table)
    columns = ", ".join(f"s.{q(f.column or f.attname)}" for f in Summary._meta.concrete_fields)
    sql = (
        _lineage_cte()  # noqa: S608 (quoted identifiers; the values are bound)
        + f"""
        SELECT {columns} FROM {summaries} s
        JOIN {messages} m ON s.last_message_id = m.id
        JOIN lineage l ON m.branch_id = l.id
        WHERE m.position < l.upper
        ORDER BY s.end_position DESC, s.id DESC
        LIMIT 1
    """  # noqa: S608 (quoted identifiers; the values are bound)
    )
    found = list(Summary.objects.raw(sql, [stop, branch.pk]))
    return found[0] if found else None


def history_size(branch: Branch, *, start: int = 0, end: int | None = None) -> tuple[int, int]:
    """How many characters (text, tool calls, tool results) and messages the branch's history
    holds from `start` to `end`: one aggregate query, no message is loaded."""
    stop = branch.message_count if end is None else max(0, min(end, branch.message_count))
    start = max(0, start)
    if start >= stop:
        return 0, 0
    q = connection.ops.quote_name
    messages = q(Message._meta.db_table)
    calls = "CAST(m.tool_calls AS TEXT)"
    sql = (
        _lineage_cte()  # noqa: S608 - quoted names and constants; values are parameters
        + f"""
        SELECT COALESCE(SUM(
                   CASE WHEN m.role = 'tool' AND m.tool_result <> '' THEN LENGTH(m.tool_result)
                        ELSE LENGTH(m.content) END
                   + COALESCE(LENGTH({calls}), 0)), 0),
               COUNT(*)
        FROM {messages} m JOIN lineage l ON m.branch_id = l.id
        WHERE m.position < l.upper AND m.position >= %s
    """  # noqa: S608 - quoted names and constants; values are parameters
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [stop, branch.pk, start])
        chars, count = cursor.fetchone()
    return int(chars or 0), int(count or 0)


# The columns a history row is read with, in the model's own order, and how each value comes
# back from the database cursor: the messages are built from them without Model.__init__ (which,
# with its descriptors and per-field converters, was most of the cost of reading a long history).
_HISTORY_FIELDS = tuple(Message._meta.concrete_fields)
_JSON_ATTNAMES = frozenset(f.attname for f in _HISTORY_FIELDS if isinstance(f, JSONField))


def _history_sql() -> str:
    q = connection.ops.quote_name
    messages = q(Message._meta.db_table)
    columns = ", ".join(f"m.{q(f.column or f.attname)}" for f in _HISTORY_FIELDS)
    return (
        _lineage_cte()  # noqa: S608 - quoted names and constants; values are parameters
        + f"""
        SELECT {columns} FROM {messages} m JOIN lineage l ON m.branch_id = l.id
        WHERE m.position < l.upper AND m.position >= %s
        ORDER BY m.position
    """  # noqa: S608 - quoted names and constants; values are parameters
    )


def _json_value(value: Any) -> Any:
    # What JSONField.from_db_value gives, without a decoder call for the common empty cases.
    if value is None or not isinstance(value, str | bytes | bytearray):
        return value  # NULL, or a driver that decodes JSON itself
    if value == "{}":
        return {}
    return json.loads(value)


def _messages_from_rows(rows: Iterable[Sequence[Any]]) -> list[Message]:
    """Message instances from history rows, as the ORM would build them (same attributes, values
    and state: saved, loaded from this database), built directly."""
    attnames = [f.attname for f in _HISTORY_FIELDS]
    json_at = [i for i, name in enumerate(attnames) if name in _JSON_ATTNAMES]
    created_at = attnames.index("created_at")
    datetime_value = _datetime_converter()
    alias = connection.alias
    new = Message.__new__
    out = []
    for row in rows:
        values = list(row)
        for i in json_at:
            values[i] = _json_value(values[i])
        values[created_at] = datetime_value(values[created_at])
        message = new(Message)
        state = ModelState()
        state.adding = False
        state.db = alias
        message.__dict__.update(zip(attnames, values, strict=True))
        message._state = state
        out.append(message)
    return out


def _datetime_converter() -> Callable[[Any], Any]:
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


def branch_history(branch: Branch, *, start: int = 0, end: int | None = None) -> list[Message]:
    """The branch's history from position `start` up to (not including) `end`, oldest first.

    Inherited messages come from the ancestors up to each fork point; nothing is copied. One
    query, whatever the branch's depth or length. Positions are dense (0 .. message_count - 1),
    so a page of the history is a range of positions.
    """
    stop = branch.message_count if end is None else max(0, min(end, branch.message_count))
    start = max(0, start)
    if start >= stop:
        return []
    with connection.cursor() as cursor, without_cyclic_gc():
        cursor.execute(_history_sql(), [stop, branch.pk, start])
        return _messages_from_rows(cursor.fetchall())


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


_ROW_FIELDS = (
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


def _rows_sql() -> str:
    q = connection.ops.quote_name
    messages = q(Message._meta.db_table)
    columns = ", ".join(f"m.{q(name)}" for name in _ROW_FIELDS)
    return (
        _lineage_cte()  # noqa: S608 (quoted identifiers; the values are bound)
        + f"""
        SELECT {columns} FROM {messages} m JOIN lineage l ON m.branch_id = l.id
        WHERE m.position < l.upper AND m.position >= %s
        ORDER BY m.position
    """  # noqa: S608 (quoted identifiers; the values are bound)
    )


def branch_history_rows(
    branch: Branch, *, start: int = 0, end: int | None = None
) -> list[HistoryRow]:
    """`branch_history` as plain dicts (HistoryRow), for a reader that only serialises them
    (the API's history): the same rows, range and order, in one query, without building a
    model instance or running a serializer field per value."""
    stop = branch.message_count if end is None else max(0, min(end, branch.message_count))
    start = max(0, start)
    if start >= stop:
        return []
    datetime_value = _datetime_converter()
    loads = _json_value
    with connection.cursor() as cursor, without_cyclic_gc():
        cursor.execute(_rows_sql(), [stop, branch.pk, start])
        return [
            {
                "id": pk,
                "position": position,
                "role": role,
                "content": content,
                "tool_name": tool_name,
                "tool_args": loads(tool_args),
                "tool_result": tool_result,
                "tool_call_id": tool_call_id,
                "tool_calls": loads(tool_calls),
                "effect": effect or None,
                "metadata": loads(metadata),
                "created_at": datetime_value(created_at),
            }
            for (
                pk,
                position,
                role,
                content,
                tool_name,
                tool_args,
                tool_result,
                tool_call_id,
                tool_calls,
                effect,
                metadata,
                created_at,
            ) in cursor.fetchall()
        ]


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
