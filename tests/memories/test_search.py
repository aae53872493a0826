"""The memory search, on both databases (the suite's SQLite phase and its PostgreSQL phase):
ranked by level (a match in the key or L0 outranks one in L1, which outranks one in L2), kept
in step with every write, robust to any query text, never beyond the memories it is given."""

from __future__ import annotations

import pytest

from memories.models import Memory
from memories.search import search_memories
from memories.selectors import memories_listed, prompt_line, prompt_memories
from memories.services import memory_create, memory_delete, memory_update

pytestmark = pytest.mark.django_db


def keys(memories) -> list[str]:
    return [m.key for m in memories]


def make(user, key, l0, l1="", l2="", category="Project"):
    return memory_create(
        user=user, key=key, category=category, l0_abstract=l0, l1_overview=l1, l2_details=l2
    )


def test_a_match_in_l0_outranks_one_in_l1_which_outranks_one_in_l2(alice):
    # The deepest match is made the strongest by every other measure (the word twice, in the
    # shortest text), so only the levels' weights can put the L0 match first.
    make(alice, "deep", "Notes on tooling", l2="helix helix")
    make(alice, "middle", "Notes on the terminal", l1="I tried helix once, long ago, and left")
    make(
        alice,
        "top",
        "Uses the helix editor for all of their code, with many plugins and their own themes",
        l2="long details " * 50,
    )
    found = search_memories(Memory.objects.for_user(alice), "helix")
    assert keys(found) == ["top", "middle", "deep"]


def test_the_key_weighs_like_the_abstract(alice):
    make(alice, "helix", "The editor they use")
    make(alice, "other", "Some notes", l2="helix")
    assert keys(search_memories(Memory.objects.for_user(alice), "helix")) == ["helix", "other"]


def test_all_words_must_match_in_the_box_any_word_in_recall(alice):
    make(alice, "editor", "Uses helix for code")
    make(alice, "shell", "Uses fish as shell")
    memories = Memory.objects.for_user(alice)
    assert keys(search_memories(memories, "helix code")) == ["editor"]
    assert keys(search_memories(memories, "helix fish")) == []
    assert sorted(keys(search_memories(memories, "helix fish", any_term=True))) == [
        "editor",
        "shell",
    ]


def test_the_index_follows_updates_and_deletes(alice):
    memory = make(alice, "editor", "Uses vim")
    memories = Memory.objects.for_user(alice)
    assert keys(search_memories(memories, "vim")) == ["editor"]
    memory_update(memory=memory, l0_abstract="Uses emacs")
    assert keys(search_memories(memories, "vim")) == []
    assert keys(search_memories(memories, "emacs")) == ["editor"]
    memory_delete(memory=memory)
    assert keys(search_memories(memories, "emacs")) == []


@pytest.mark.parametrize(
    "query",
    [
        '"foo" OR -bar (baz',
        "*:&|!",
        '"',
        "AND OR NOT",
        "NEAR(a b)",
        "key:editor",
        "l0_abstract:vim",
        "'; DROP TABLE memories_memory; --",
        "ünïcödé 日本語 \u200b",
        "a" * 300,
        "foo*",
        "(((",
        "-",
        "\\",
    ],
)
def test_any_query_text_answers_without_an_error(alice, query):
    make(alice, "editor", "Uses vim and foo")
    found = list(search_memories(Memory.objects.for_user(alice), query))
    found_any = list(search_memories(Memory.objects.for_user(alice), query, any_term=True))
    assert set(keys(found)) <= {"editor"}
    assert set(keys(found_any)) <= {"editor"}
    assert Memory.objects.count() == 1


def test_operators_typed_are_plain_words(alice):
    make(alice, "logic", "The words and or not near")
    make(alice, "other", "Nothing here")
    memories = Memory.objects.for_user(alice)
    assert keys(search_memories(memories, "or")) == ["logic"]
    assert keys(search_memories(memories, "near")) == ["logic"]


def test_an_empty_query_lists_newest_first_and_a_wordless_one_nothing(alice):
    make(alice, "first", "One")
    make(alice, "second", "Two")
    assert keys(memories_listed(alice, query="  ")) == ["second", "first"]
    assert keys(memories_listed(alice, query="*:&|!")) == []


def test_a_search_never_reaches_another_users_memories(alice, bob):
    make(alice, "editor", "Alice uses helix")
    make(bob, "editor", "Bob uses helix")
    found = memories_listed(alice, query="helix")
    assert [m.user_id for m in found] == [alice.pk]


def test_the_prompt_takes_relevant_lines_first_within_the_budget(alice):
    make(alice, "shell", "Uses fish as shell")
    make(alice, "editor", "Uses helix for code")
    for i in range(30):
        make(alice, f"filler-{i}", f"Filler fact number {i}")
    picked = prompt_memories(alice, "which editor do I use?", budget=200)
    assert picked[0].key == "editor"
    assert sum(len(prompt_line(m)) + 1 for m in picked) <= 200
    assert len(picked) > 1  # the rest of the budget is filled
    assert prompt_memories(alice, "anything", budget=0) == []
