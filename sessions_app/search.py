"""Searching a user's sessions by name and by the text of their messages: one service, two
engines behind it.

A query is read as words (runs of letters and digits; everything else separates them, as both
engines' tokenizers do), each matched as the start of a word: "restor" finds "restore" and
"restored". Every word must match.

- PostgreSQL: full-text search. The words become a `to_tsquery('simple', ...)` of prefix
  lexemes (`'restor':* & 'two':*`), built from letters and digits only, so nothing the user
  types is read as tsquery syntax. It is matched against
  `to_tsvector('simple', left(content, SEARCH_INDEXED_CHARS))`, the very expression of the GIN
  index migration 0010 creates (a GIN index answers prefix lexemes too), so the search reads the
  index instead of every message. The `simple` configuration (no stemming, no stop words) suits
  conversations in any language. Only the first SEARCH_INDEXED_CHARS characters of a message are
  indexed: that bounds the index and keeps a huge message from failing its insert (a tsvector
  holds at most 1 MB).
- SQLite: an FTS5 table over message content (external content: it keeps only the index), kept
  in step by triggers on insert and delete (and on update, though messages are never updated),
  created by migration 0010. Each word is quoted as an FTS5 string followed by `*` (a prefix
  query); should MATCH fail anyway, the search falls back to a substring scan.

Names and session keys match by substring (every word must appear in one or the other, ignoring
case). Each session found carries the id of its newest matching message (`hit_message_id`), and
`snippet` cuts the text around the match for the list to show, escaped by the template with the
matched words marked.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from django.db import DatabaseError, connection
from django.db.models import IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.expressions import RawSQL

from core.errors import InvalidInput
from core.validation import SEARCH_MAX_LENGTH, clean_search

from .models import Branch, Message, Session

log = logging.getLogger(__name__)

FTS_TABLE = "sessions_app_message_fts"
SEARCH_INDEXED_CHARS = 100_000
MAX_TERMS = 16
SNIPPET_CHARS = 140  # about how much text a snippet shows around its match
CONVERSATION_HITS = 30  # the hits a search inside one conversation lists a page ("Show more")
_WORDS = re.compile(r"[^\W_]+", re.UNICODE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def search_terms(query: str) -> list[str]:
    """The words of a query: its runs of letters and digits, lower-cased, each once, at most
    MAX_TERMS of them (quotes, operators and punctuation only separate words)."""
    words: list[str] = []
    for word in _WORDS.findall(query.lower()):
        if word not in words:
            words.append(word)
    return words[:MAX_TERMS]


def search_check(query: str) -> str:
    """A search as typed (already through core.validation.clean_search), refused with a clear
    message when no engine can read it: control characters, or no letter or digit at all."""
    if _CONTROL.search(query):
        raise InvalidInput("The search cannot contain control characters.")
    if query and not search_terms(query):
        raise InvalidInput("Type a word to search for: the search holds no letter or digit.")
    return query


def search_clean(value: object) -> str:
    """A search from a user (a query parameter), as the session searches read it: trimmed, and
    refused with a clear message when it is longer than SEARCH_MAX_LENGTH, holds a NUL or
    another control character, or no letter or digit at all."""
    if isinstance(value, str) and len(value.strip()) > SEARCH_MAX_LENGTH:
        raise InvalidInput(
            f"The search is {len(value.strip())} characters long; the limit is {SEARCH_MAX_LENGTH}."
        )
    return search_check(clean_search(value))


def fts5_expression(terms: list[str]) -> str:
    """An FTS5 MATCH expression requiring a word starting with each term, each quoted as a
    string (a quote inside is doubled), so nothing the user typed is read as FTS5 syntax."""
    return " ".join('"' + t.replace('"', '""') + '"*' for t in terms)


def tsquery_expression(terms: list[str]) -> str:
    """A PostgreSQL tsquery requiring a lexeme starting with each term. The terms hold letters
    and digits only (search_terms), so quoting them cannot be escaped from."""
    return " & ".join("'" + t.replace("'", "''").replace("\\", "\\\\") + "':*" for t in terms)


def _names_matching(terms: list[str]) -> Q:
    condition = Q()
    for term in terms:
        condition &= Q(session_name__icontains=term) | Q(session_key__icontains=term)
    return condition


def messages_matching(query: str) -> QuerySet[Message]:
    """Every message (of anyone: narrow it) whose text holds a word starting with each word of
    `query`, through the full-text index; by substring when no index can answer."""
    terms = search_terms(query)
    if not terms:
        return Message.objects.none()
    table = connection.ops.quote_name(Message._meta.db_table)
    if connection.vendor == "postgresql":
        # Written out as in the index (a literal length, not a parameter), so the planner uses it.
        sql = (
            f"SELECT id FROM {table} WHERE "  # noqa: S608 - quoted names and constants; values are parameters
            f"to_tsvector('simple', left(content, {int(SEARCH_INDEXED_CHARS)})) "
            "@@ to_tsquery('simple', %s)"
        )
        return Message.objects.filter(pk__in=RawSQL(sql, [tsquery_expression(terms)]))  # noqa: S611 - quoted names and constants; values are parameters
    if connection.vendor == "sqlite":
        expression = fts5_expression(terms)
        fts = connection.ops.quote_name(FTS_TABLE)
        sql = f"SELECT rowid FROM {fts} WHERE {fts} MATCH %s"  # noqa: S608 - quoted names and constants; values are parameters
        try:  # read the expression now, so a failure falls back instead of failing the page
            with connection.cursor() as cursor:
                cursor.execute(sql + " LIMIT 1", [expression])
        except DatabaseError:
            log.warning("Full-text search failed for %r; searching by substring.", expression)
        else:
            return Message.objects.filter(pk__in=RawSQL(sql, [expression]))  # noqa: S611 - quoted names and constants; values are parameters
    condition = Q()
    for term in terms:
        condition &= Q(content__icontains=term)
    return Message.objects.filter(condition)


def search_sessions(sessions: QuerySet[Session], query: str) -> QuerySet[Session]:
    """Those of `sessions` whose name or session key holds every word of `query` (each word in
    one or the other), or one of whose messages matches it, each with `hit_message_id` (its
    newest matching message, or None when only the name matched); all of them for an empty
    query, none for a query with no word in it. Only ever narrows `sessions`, so a search never
    reaches beyond the sessions it was given."""
    query = query.strip()
    if not query:
        return sessions
    terms = search_terms(query)
    if not terms:
        return sessions.none()
    hits = messages_matching(query).filter(branch__session=OuterRef("pk")).order_by("-pk")
    newest = Subquery(hits.values("pk")[:1], output_field=IntegerField())
    return sessions.annotate(hit_message_id=newest).filter(
        _names_matching(terms) | Q(hit_message_id__isnull=False)
    )


@dataclass(frozen=True)
class SnippetPart:
    text: str
    hit: bool


def snippet(text: str, query: str, *, width: int = SNIPPET_CHARS) -> list[SnippetPart]:
    """The part of `text` around the first word that starts with a word of `query`, cut to
    about `width` characters (with … where cut), as plain text pieces; those that match are
    marked `hit`. A template escapes each piece, so the text is never read as HTML."""
    terms = search_terms(query)
    text = " ".join(text.split())  # one line: a list entry shows no line breaks
    if not terms or not text:
        return [SnippetPart(text[:width], False)] if text else []
    pattern = re.compile(
        r"(?<![^\W_])(?:" + "|".join(re.escape(t) for t in terms) + r")[^\W_]*", re.IGNORECASE
    )
    first = pattern.search(text)
    start = 0 if first is None else max(0, first.start() - width // 3)
    if start > 0:  # from the start of a word
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < (first.start() if first else start) else start
    end = min(len(text), start + width)
    piece = text[start:end]
    parts: list[SnippetPart] = []
    if start > 0:
        parts.append(SnippetPart("…", False))
    at = 0
    for match in pattern.finditer(piece):
        if match.start() > at:
            parts.append(SnippetPart(piece[at : match.start()], False))
        parts.append(SnippetPart(match.group(), True))
        at = match.end()
    if at < len(piece):
        parts.append(SnippetPart(piece[at:], False))
    if end < len(text):
        parts.append(SnippetPart("…", False))
    return parts


def hit_snippets(sessions: list[Session], query: str) -> dict[int, list[SnippetPart]]:
    """The snippet of each session's matching message (search_sessions' `hit_message_id`), by
    session id: one query for the messages of the sessions shown."""
    ids = [getattr(s, "hit_message_id", None) for s in sessions]
    wanted = [pk for pk in ids if pk is not None]
    if not wanted:
        return {}
    rows = Message.objects.filter(pk__in=wanted).values_list("pk", "content", "tool_result")
    texts = {pk: content or tool_result for pk, content, tool_result in rows}
    return {
        s.pk: snippet(texts[pk], query)
        for s, pk in zip(sessions, ids, strict=True)
        if pk is not None and pk in texts
    }


def history_matching(lineage: list[tuple[int, int]], query: str) -> QuerySet[Message]:
    """The messages of a branch's history (`lineage`: selectors.branch_lineage) that match
    `query`, in no order. A history holds one message at each position."""
    if not search_terms(query) or not lineage:
        return Message.objects.none()
    in_history = Q()
    for branch_id, upper in lineage:
        in_history |= Q(branch_id=branch_id, position__lt=upper)
    return messages_matching(query).filter(in_history)


def search_history(branch: Branch, lineage: list[tuple[int, int]], query: str) -> list[Message]:
    """The messages of a branch's history (`lineage`: selectors.branch_lineage) that match
    `query`, newest first, at most CONVERSATION_HITS."""
    return list(history_matching(lineage, query).order_by("-position")[:CONVERSATION_HITS])


@dataclass(frozen=True)
class HistoryHits:
    """A page of a history's matching messages, newest first: `total` counts every match of the
    history (on the first page only: None on the next ones), `more` says older ones follow."""

    messages: list[Message]
    total: int | None
    more: bool

    @property
    def next_before(self) -> int | None:
        """The position the next page's hits are below (None: this page is the last)."""
        return self.messages[-1].position if self.more and self.messages else None


def search_history_page(
    lineage: list[tuple[int, int]], query: str, *, before: int | None = None
) -> HistoryHits:
    """The newest CONVERSATION_HITS messages of a history that match `query`, below position
    `before` when given (the next page: no count), else with the count of every match. Two
    reads at most (besides SQLite's check of its expression): the page (one more row, to know
    whether more follow), and the count only when the page does not hold them all."""
    matched = history_matching(lineage, query)
    if before is not None:
        matched = matched.filter(position__lt=before)
    found = list(matched.order_by("-position")[: CONVERSATION_HITS + 1])
    more = len(found) > CONVERSATION_HITS
    found = found[:CONVERSATION_HITS]
    total = None
    if before is None:
        total = matched.count() if more else len(found)
    return HistoryHits(messages=found, total=total, more=more)


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
