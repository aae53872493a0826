"""Searching a user's memories in full text, ranked: one service, two engines behind it (as
sessions_app.search does for messages).

- PostgreSQL: a weighted search vector, the key and the L0 abstract weighing most (A), then the
  L1 overview (B), then the L2 details (C), under the GIN index of migration 0002 (the very
  expression VECTOR below), ranked by `ts_rank`. The `simple` configuration (no stemming, no stop
  words) suits any language.
- SQLite: an FTS5 table over the same four columns (external content, kept in step by triggers,
  made by migration 0002), ranked by `bm25` with the same order of weights.

Two ways to match: `all` words of the query (the search box; on PostgreSQL read by
`websearch_to_tsquery`, which understands "quoted phrases", `or` and `-word` and never fails),
or `any` of them (the agent's recall and the memories the system prompt carries, where the query
is a sentence). Every term given to FTS5 is quoted as a string, so quotes and operators a user
types are plain text; a query with no letter or digit in it matches nothing, an empty one
leaves the memories as they were given.
"""

from __future__ import annotations

import logging
import re

from django.db import DatabaseError, connection
from django.db.models import BooleanField, F, FloatField, Q, QuerySet
from django.db.models.expressions import RawSQL

from core.validation import storable_text

from .models import Memory

log = logging.getLogger(__name__)

FTS_TABLE = "memories_memory_fts"
TABLE = "memories_memory"
SEARCH_INDEXED_CHARS = 100_000
MAX_TERMS = 16
MAX_QUERY_CHARS = 2_000
# bm25's weights of the FTS5 columns, in their order: key, l0_abstract, l1_overview, l2_details.
FTS_WEIGHTS = (10.0, 10.0, 4.0, 1.0)
# On SQLite, the rank of a memory starts from the level of its best match (all the terms in the
# key or L0, else in L1, else anywhere), far above what bm25 adds.
LEVEL_A, LEVEL_B, LEVEL_C = 3000, 2000, 1000
# PostgreSQL's ts_rank weights of the levels, in its order {D, C, B, A}: A match in L0 (A)
# outweighs many in L2 (C).
TS_WEIGHTS = "{0.01, 0.05, 0.3, 1.0}"
_WORD = re.compile(r"\w", re.UNICODE)


def vector_sql(table: str = "") -> str:
    """The weighted tsvector of a memory: the expression of the GIN index (unqualified), or the
    same over `table`'s columns."""
    q = f"{table}." if table else ""
    return (
        f"setweight(to_tsvector('simple', {q}key || ' ' || {q}l0_abstract), 'A') || "
        f"setweight(to_tsvector('simple', {q}l1_overview), 'B') || "
        f"setweight(to_tsvector('simple', left({q}l2_details, {SEARCH_INDEXED_CHARS})), 'C')"
    )


def search_terms(query: str) -> list[str]:
    """The words of a query that can match anything: split on white space, without the pieces
    that hold no letter or digit, at most MAX_TERMS of them."""
    return [t for t in query.split() if _WORD.search(t)][:MAX_TERMS]


def fts5_expression(terms: list[str], *, any_term: bool) -> str:
    """An FTS5 MATCH expression of the terms, each quoted as a string (a quote inside doubled),
    all of them required, or any one."""
    quoted = ['"' + t.replace('"', '""') + '"' for t in terms]
    return (" OR " if any_term else " ").join(quoted)


def _postgres(
    memories: QuerySet[Memory], query: str, terms: list[str], any_term: bool
) -> QuerySet[Memory]:
    vector = vector_sql(connection.ops.quote_name(TABLE))
    if any_term:
        tsquery = "(" + " || ".join(["plainto_tsquery('simple', %s)"] * len(terms)) + ")"
        params: list[str] = list(terms)
    else:
        tsquery, params = "websearch_to_tsquery('simple', %s)", [query]
    matched = RawSQL(f"({vector}) @@ {tsquery}", params, output_field=BooleanField())  # noqa: S611 - quoted names and constants; values are parameters
    rank = RawSQL(  # noqa: S611 - quoted names and constants; values are parameters
        f"ts_rank('{TS_WEIGHTS}'::float4[], {vector}, {tsquery})", params, output_field=FloatField()
    )
    return memories.filter(matched).annotate(rank=rank)


def _sqlite(
    memories: QuerySet[Memory], terms: list[str], any_term: bool
) -> QuerySet[Memory] | None:
    expression = fts5_expression(terms, any_term=any_term)
    fts = connection.ops.quote_name(FTS_TABLE)
    table = connection.ops.quote_name(TABLE)
    try:  # read the expression now: should FTS5 refuse it, the search falls back
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT rowid FROM {fts} WHERE {fts} MATCH %s LIMIT 1", [expression])  # noqa: S608 - quoted names and constants; values are parameters
    except DatabaseError:
        log.warning("Memory search failed for %r; searching by substring.", expression)
        return None
    matching = f"SELECT rowid FROM {fts} WHERE {fts} MATCH %s"  # noqa: S608 - quoted names and constants; values are parameters
    # bm25 alone would let a long memory's L0 match sink below a short one's L2 match (it
    # divides by the whole row's length): the level of the best match comes first, bm25 (with
    # the levels' weights) orders the memories within a level.
    weights = ", ".join(str(w) for w in FTS_WEIGHTS)
    rank = RawSQL(  # noqa: S611 - quoted names and constants; values are parameters
        f"(CASE WHEN {table}.id IN ({matching}) THEN {LEVEL_A} "  # noqa: S608 - quoted names and constants; values are parameters
        f"WHEN {table}.id IN ({matching}) THEN {LEVEL_B} ELSE {LEVEL_C} END) + "
        f"(SELECT -bm25({fts}, {weights}) FROM {fts} "
        f"WHERE {fts} MATCH %s AND {fts}.rowid = {table}.id)",
        [
            f"{{key l0_abstract}} : ({expression})",
            f"{{l1_overview}} : ({expression})",
            expression,
        ],
        output_field=FloatField(),
    )
    return memories.filter(pk__in=RawSQL(matching, [expression])).annotate(rank=rank)  # noqa: S611 - quoted names and constants; values are parameters


def search_memories(
    memories: QuerySet[Memory], query: str, *, any_term: bool = False
) -> QuerySet[Memory]:
    """Those of `memories` that match `query`, best match first (then newest); all of them,
    newest first, for an empty query; none for a query without a word. Only ever narrows
    `memories`, so a search never reaches beyond the memories it was given."""
    # Text no database takes in a query (NUL, lone surrogates) is dropped; a sentence is cut.
    query = storable_text(query).strip()[:MAX_QUERY_CHARS]
    if not query:
        return memories.order_by("-created_at", "-id")
    terms = search_terms(query)
    if not terms:
        return memories.none()
    found = None
    if connection.vendor == "postgresql":
        found = _postgres(memories, query, terms, any_term)
    elif connection.vendor == "sqlite":
        found = _sqlite(memories, terms, any_term)
    if found is None:  # no engine: every term (or one) in the abstract, by substring
        condition = Q()
        for term in terms:
            part = Q(l0_abstract__icontains=term) | Q(key__icontains=term)
            condition = (condition | part) if any_term else (condition & part)
        return memories.filter(condition).order_by("-created_at", "-id")
    # The annotation `rank` is unknown to the type checker's plugin: ordered by expression.
    return found.order_by(F("rank").desc(), "-created_at", "-id")


def search_index_forget_deleted() -> None:
    """Make the search index forget deleted memories for good (see
    sessions_app.search.search_index_forget_deleted): SQLite's FTS5 keeps a deleted row's words
    in older segments until 'optimize' merges them; PostgreSQL's index follows the table."""
    if connection.vendor != "sqlite":
        return
    fts = connection.ops.quote_name(FTS_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")  # noqa: S608 - quoted names and constants; values are parameters
