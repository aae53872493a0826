"""A branch's history: the messages of its lineage (the branch and its ancestors up to each fork
point, nothing copied), read in one query whatever its depth or length, and what it holds (its
size, its effects, its summary)."""

from __future__ import annotations

from django.db import connection

from ..feedback import feedback_of
from ..models import Branch, Message, Summary
from .rows import (
    HISTORY_FIELDS,
    ROW_FIELDS,
    HistoryRow,
    datetime_converter,
    json_value,
    messages_from_rows,
    without_cyclic_gc,
)


def lineage_cte() -> str:
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
        cursor.execute(lineage_cte() + "SELECT id, upper FROM lineage", [stop, branch.pk])  # noqa: S608 - quoted names and constants; values are parameters
        return [(int(row[0]), int(row[1])) for row in cursor.fetchall()]


def common_length(
    a: Branch, b: Branch, *, a_end: int | None = None, b_end: int | None = None
) -> int:
    """How many messages the histories of `a` (below `a_end`) and `b` (below `b_end`) share
    from their start: the same rows, since histories form a tree. Two lineage reads."""
    ours = dict(branch_lineage(a, end=a_end))
    shared = [min(upper, ours[pk]) for pk, upper in branch_lineage(b, end=b_end) if pk in ours]
    return max(shared, default=0)


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
        lineage_cte()  # noqa: S608 (quoted identifiers; the values are bound)
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
        lineage_cte()  # noqa: S608 - quoted names and constants; values are parameters
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


def _history_sql() -> str:
    q = connection.ops.quote_name
    messages = q(Message._meta.db_table)
    columns = ", ".join(f"m.{q(f.column or f.attname)}" for f in HISTORY_FIELDS)
    return (
        lineage_cte()  # noqa: S608 - quoted names and constants; values are parameters
        + f"""
        SELECT {columns} FROM {messages} m JOIN lineage l ON m.branch_id = l.id
        WHERE m.position < l.upper AND m.position >= %s
        ORDER BY m.position
    """  # noqa: S608 - quoted names and constants; values are parameters
    )


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
        return messages_from_rows(cursor.fetchall())


def _rows_sql() -> str:
    q = connection.ops.quote_name
    messages = q(Message._meta.db_table)
    columns = ", ".join(f"m.{q(name)}" for name in ROW_FIELDS)
    return (
        lineage_cte()  # noqa: S608 (quoted identifiers; the values are bound)
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
    datetime_value = datetime_converter()
    loads = json_value
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
                "metadata": (meta := loads(metadata)),
                "created_at": datetime_value(created_at),
                "feedback": feedback_of(meta, role) if role == "assistant" else None,
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
