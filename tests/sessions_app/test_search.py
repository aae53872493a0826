"""The search over sessions (sessions_app/search.py). It runs as it is on SQLite (FTS5) and on
PostgreSQL (full-text search), in the two phases of `make test`."""

from __future__ import annotations

import pytest

from core.validation import clean_search
from sessions_app.models import ExternalSession
from sessions_app.search import search_sessions
from sessions_app.selectors import sessions_listed
from sessions_app.services import message_append, session_create, session_delete, session_update
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
    assert ExternalSession.objects.count() == 2  # and nothing was harmed


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
    only_recipe = ExternalSession.objects.filter(pk=recipe.pk)
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
