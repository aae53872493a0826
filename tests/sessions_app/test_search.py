"""The search over sessions (sessions_app/search.py). It runs as it is on SQLite (FTS5) and on
PostgreSQL (full-text search), in the two phases of `make test`."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from core.errors import InvalidInput
from core.validation import clean_search
from sessions_app.models import Session
from sessions_app.search import (
    SNIPPET_CHARS,
    SnippetPart,
    messages_matching,
    search_clean,
    search_history,
    search_sessions,
    snippet,
)
from sessions_app.selectors import branch_lineage, sessions_listed
from sessions_app.services import (
    branch_fork,
    message_append,
    session_create,
    session_delete,
    session_update,
)
from tests.conftest import say

pytestmark = pytest.mark.django_db


def found(user, query: str) -> set[str]:
    return {s.session_name for s in sessions_listed(user, query=clean_search(query))}


@pytest.fixture
def chats(alice):
    greeting = session_create(owner=alice, name="New session")
    say(greeting.branches.get(), "hello two worlds", "Hi! Two worlds it is.")
    recipe = session_create(owner=alice, name="Pancake recipe")
    say(recipe.branches.get(), "how much flour?", "About 200 grams.")
    return greeting, recipe


def test_a_word_only_in_a_message_finds_its_session(alice, chats):
    assert found(alice, "hello two") == {"New session"}
    assert found(alice, "flour") == {"Pancake recipe"}
    assert found(alice, "grams") == {"Pancake recipe"}  # the model's answers count too


def test_every_word_must_match(alice, chats):
    assert found(alice, "hello flour") == set()


def test_a_title_is_found_by_part_of_a_word(alice, chats):
    assert found(alice, "pancake") == {"Pancake recipe"}
    assert found(alice, "panc") == {"Pancake recipe"}
    assert found(alice, "RECIPE") == {"Pancake recipe"}


def test_an_empty_search_lists_everything_and_one_without_a_word_nothing(alice, chats):
    assert found(alice, "") == {"New session", "Pancake recipe"}
    assert found(alice, '" - * ( )') == set()


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"hello',
        'hello" OR "flour',
        "hello OR flour",
        "NEAR(hello two)",
        "-hello",
        "hello*",
        "content:hello",
        "^hello",
        "hello & | ! <-> :* '",
        "x" * 10_000,
        "hello " * 2_000,
        "'; DROP TABLE sessions_app_message; --",
    ],
)
def test_quotes_operators_and_long_queries_give_a_list(alice, chats, query):
    result = found(alice, query)
    assert result <= {"New session", "Pancake recipe"}
    assert Session.objects.count() == 2  # and nothing was harmed


def test_a_quoted_word_is_still_found(alice, chats):
    assert found(alice, '"hello"') == {"New session"}


def test_another_users_sessions_are_never_found(alice, bob, chats):
    theirs = session_create(owner=bob, name="Bob's hello")
    message_append(branch=theirs.branches.get(), role="user", content="hello two from bob")
    assert found(bob, "hello") == {"Bob's hello"}
    assert found(alice, "bob") == set()
    assert found(alice, "hello") == {"New session"}


def test_deleted_messages_are_no_longer_found(alice, chats):
    greeting, _ = chats
    session_delete(session=greeting)
    assert found(alice, "hello") == set()
    again = session_create(owner=alice, name="Again")
    message_append(branch=again.branches.get(), role="user", content="hello again")
    assert found(alice, "hello") == {"Again"}


def test_archived_sessions_are_searched_only_among_the_archived(alice, chats):
    greeting, _ = chats
    session_update(session=greeting, archived=True)
    assert found(alice, "hello") == set()
    archived = sessions_listed(alice, query="hello", archived=True)
    assert [s.session_name for s in archived] == ["New session"]


def test_search_only_narrows_the_sessions_it_is_given(alice, chats):
    _greeting, recipe = chats
    only_recipe = Session.objects.filter(pk=recipe.pk)
    assert list(search_sessions(only_recipe, "hello")) == []


def test_a_message_changed_by_hand_is_found_by_its_new_text(alice, chats):
    from sessions_app.models import Message

    greeting, _ = chats
    Message.objects.filter(branch__session=greeting, content="hello two worlds").update(
        content="goodbye moon"
    )
    assert found(alice, "goodbye") == {"New session"}
    assert found(alice, "hello") == set()
    session_delete(session=greeting)  # and deleting it afterwards leaves the index sound
    assert found(alice, "goodbye") == set()
    assert found(alice, "flour") == {"Pancake recipe"}


# --- Words as prefixes, snippets, refusals (issue 25) ---------------------------------------


def test_a_word_matches_the_start_of_longer_words_in_messages(alice):
    chat = session_create(owner=alice, name="Untitled")
    say(chat.branches.get(), "How do I restore a checkpoint?", "It was restored at noon.")
    assert found(alice, "restor") == {"Untitled"}
    assert found(alice, "RESTORED") == {"Untitled"}
    assert found(alice, "restor noo") == {"Untitled"}  # every word, each as a prefix
    assert found(alice, "estor") == set()  # the start of a word, not any part of it
    assert found(alice, "restor midnight") == set()


def test_a_session_found_by_a_message_carries_its_newest_matching_message(alice):
    chat = session_create(owner=alice, name="Untitled")
    say(chat.branches.get(), "restore one", "nothing", "restored two")
    newest = chat.branches.get().messages.get(content="restored two")
    [hit] = sessions_listed(alice, query="restor")
    assert hit.hit_message_id == newest.pk
    [by_name] = sessions_listed(alice, query="untitled")
    assert by_name.hit_message_id is None  # found by its name alone


def test_a_snippet_marks_each_matching_word_and_keeps_the_rest_plain_text():
    text = "Intro. " * 40 + "<b>Restored</b> the checkpoint & restore again" + " tail" * 40
    parts = snippet(text, "restor")
    assert [p.text for p in parts if p.hit] == ["Restored", "restore"]
    joined = "".join(p.text for p in parts)
    assert "<b>Restored</b> the checkpoint & restore again" in joined  # escaped by the template
    assert joined.startswith("…")
    assert joined.endswith("…")
    assert len(joined) <= SNIPPET_CHARS + 2
    assert snippet("no match here", "zzz") == [SnippetPart("no match here", False)]
    assert snippet("", "x") == []


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("hello\x07", "control characters"),
        ("\x1b[31m", "control characters"),
        ("a\x00", "NUL"),
        ('" - * ( ) ?!', "no letter or digit"),
        ("x" * 201, "the limit is 200"),
    ],
)
def test_a_search_that_cannot_be_read_is_refused_with_a_reason(query, reason):
    with pytest.raises(InvalidInput, match=re.escape(reason)):
        search_clean(query)


def test_a_search_that_can_be_read_passes_as_typed():
    assert search_clean("  restor two\t") == "restor two"
    assert search_clean(None) == ""
    assert search_clean("x" * 200) == "x" * 200


def test_search_in_a_history_finds_only_the_branchs_lineage(alice):
    chat = session_create(owner=alice, name="Chat")
    main = chat.branches.get()
    say(main, "restore alpha", "ok", "restore beta", "ok")
    main.refresh_from_db()
    fork = branch_fork(branch=main, position=2)  # keeps "restore alpha", "ok"
    say(fork, "restore gamma")
    fork.refresh_from_db()
    hits = search_history(fork, branch_lineage(fork), "restor")
    assert [m.content for m in hits] == ["restore gamma", "restore alpha"]  # newest first
    hits = search_history(main, branch_lineage(main), "restor")
    assert [m.content for m in hits] == ["restore beta", "restore alpha"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's GIN index")
def test_prefix_search_reads_the_gin_index_on_postgresql(alice, chats):
    sql, params = messages_matching("restor wor").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "message_content_search" in plan
