"""Searching a user's sessions by name and by the text of their messages: one service, two
engines behind it.

- PostgreSQL: full-text search. The query is read with `websearch_to_tsquery` (what people type
  into a search box: words, "quoted phrases", `or`, `-word`; it never fails on any input) and
  matched against `to_tsvector('simple', left(content, SEARCH_INDEXED_CHARS))`, the very
  expression of the GIN index migration 0010 creates, so the search reads the index instead of
  every message. The `simple` configuration (no stemming, no stop words) suits conversations in
  any language. Only the first SEARCH_INDEXED_CHARS characters of a message are indexed: that
  bounds the index and keeps a huge message from failing its insert (a tsvector holds at most
  1 MB).
- SQLite: an FTS5 table over message content (external content: it keeps only the index), kept
  in step by triggers on insert and delete (and on update, though messages are never updated),
  created by migration 0010.
  Each term of the query is quoted as an FTS5 string, so quotes and operators a user types are
  plain text and cannot break the MATCH syntax; should MATCH fail anyway, the search falls back
  to a substring scan.

Either way names and session keys match by substring (every term must appear in one or the other,
ignoring case), so a partial word still finds a title, and messages match by whole words (all of
them).
"""

from __future__ import annotations

import logging
import re

from django.db import DatabaseError, connection
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL

from .models import ExternalSession, Message

log = logging.getLogger(__name__)

FTS_TABLE = "sessions_app_message_fts"
SEARCH_INDEXED_CHARS = 100_000
MAX_TERMS = 16
_WORD = re.compile(r"\w", re.UNICODE)


def search_terms(query: str) -> list[str]:
    """The words of a query that can match anything: split on white space, without the pieces
    that hold no letter or digit (a lone quote, `-`, `*`), at most MAX_TERMS of them."""
    return [t for t in query.split() if _WORD.search(t)][:MAX_TERMS]


def fts5_expression(terms: list[str]) -> str:
    """An FTS5 MATCH expression requiring every term, each quoted as a string (a quote inside
    is doubled), so nothing the user typed is read as FTS5 syntax."""
    return " ".join('"' + t.replace('"', '""') + '"' for t in terms)


def _names_matching(terms: list[str]) -> Q:
    condition = Q()
    for term in terms:
        condition &= Q(session_name__icontains=term) | Q(session_key__icontains=term)
    return condition


def _message_ids(query: str, terms: list[str]) -> QuerySet[Message] | None:
    """The messages whose text matches, as a subquery; None when no engine can answer."""
    table = connection.ops.quote_name(Message._meta.db_table)
    if connection.vendor == "postgresql":
        # Written out as in the index (a literal length, not a parameter), so the planner uses it.
        sql = (
            f"SELECT id FROM {table} WHERE "  # noqa: S608 - quoted names and constants; values are parameters
            f"to_tsvector('simple', left(content, {int(SEARCH_INDEXED_CHARS)})) "
            "@@ websearch_to_tsquery('simple', %s)"
        )
        return Message.objects.filter(pk__in=RawSQL(sql, [query]))  # noqa: S611 - quoted names and constants; values are parameters
    if connection.vendor == "sqlite":
        expression = fts5_expression(terms)
        fts = connection.ops.quote_name(FTS_TABLE)
        sql = f"SELECT rowid FROM {fts} WHERE {fts} MATCH %s"  # noqa: S608 - quoted names and constants; values are parameters
        try:  # read the expression now, so a failure falls back instead of failing the page
            with connection.cursor() as cursor:
                cursor.execute(sql + " LIMIT 1", [expression])
        except DatabaseError:
            log.warning("Full-text search failed for %r; searching by substring.", expression)
            return None
        return Message.objects.filter(pk__in=RawSQL(sql, [expression]))  # noqa: S611 - quoted names and constants; values are parameters
    return None


def search_sessions(sessions: QuerySet[ExternalSession], query: str) -> QuerySet[ExternalSession]:
    """Those of `sessions` whose name or session key holds every word of `query` (each word in
    one or the other), or one of whose messages
    matches it; all of them for an empty query, none for a query with no word in it. Only ever
    narrows `sessions`, so a search never reaches beyond the sessions it was given."""
    query = query.strip()
    if not query:
        return sessions
    terms = search_terms(query)
    if not terms:
        return sessions.none()
    matched = _message_ids(query, terms)
    if matched is None:
        matched = Message.objects.filter(content__icontains=query)
    in_messages = Exists(matched.filter(branch__session=OuterRef("pk")))
    return sessions.filter(_names_matching(terms) | Q(in_messages))


def search_index_forget_deleted() -> None:
    """Make the search index forget deleted messages for good. SQLite's FTS5 records a deletion
    as a marker and keeps the words in its older segments until they are merged: 'optimize'
    merges them all (its cost grows with the index, so only an erasure calls it). PostgreSQL's
    index follows the table's rows, which its vacuum reclaims."""
    if connection.vendor != "sqlite":
        return
    fts = connection.ops.quote_name(FTS_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")  # noqa: S608 - quoted names and constants; values are parameters
