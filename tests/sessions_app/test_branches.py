"""Branch names, the labels every page and the API show, and the versions of a message."""

from __future__ import annotations

import pytest

from checkpoints.services import checkpoint_create, checkpoint_restore
from core.errors import InvalidInput
from sessions_app.labels import branch_label, session_branch_labels
from sessions_app.models import Branch
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import (
    branch_activate,
    branch_fork,
    branch_rename,
    message_append,
    session_create,
)
from sessions_app.versions import message_versions
from tests.conftest import say

pytestmark = pytest.mark.django_db


@pytest.fixture
def talked(branch):
    say(branch, "one", "reply one", "two", "reply two")
    branch.refresh_from_db()
    return branch


def _edit(branch: Branch, position: int, text: str) -> Branch:
    """What an edit of the user message at `position` does (agents.services.turn_edit)."""
    fork = branch_fork(branch=branch, position=position, metadata={"edited_message": 1})
    say(fork, text, f"reply to {text}")
    fork.refresh_from_db()
    return fork


def test_renaming_a_branch_keeps_the_trimmed_name(talked):
    branch_rename(branch=talked, name="  the plan  ")
    talked.refresh_from_db()
    assert talked.name == "the plan"
    assert branch_label(talked) == "the plan"


@pytest.mark.parametrize("name", ["", "   ", "x" * 201, None, 7])
def test_an_empty_too_long_or_non_text_name_is_refused_and_nothing_changes(talked, name):
    branch_rename(branch=talked, name="kept")
    with pytest.raises(InvalidInput):
        branch_rename(branch=talked, name=name)
    talked.refresh_from_db()
    assert talked.name == "kept"


def test_a_name_of_exactly_200_characters_is_accepted(talked):
    branch_rename(branch=talked, name="x" * 200)
    talked.refresh_from_db()
    assert talked.name == "x" * 200


def test_default_labels_say_where_a_branch_starts_and_never_show_a_database_id(session, talked):
    mark = checkpoint_create(branch=talked, name="start")
    edited = _edit(talked, 2, "two, edited")
    again = _edit(talked, 2, "two, edited again")
    regenerated = branch_fork(branch=talked, position=2, metadata={"regenerated": 4})
    restored = checkpoint_restore(checkpoint=mark, session=session).branch
    plain = branch_fork(branch=talked, position=1)
    labels = session_branch_labels(session)
    assert labels == {
        talked.pk: "main",
        edited.pk: "edit of message 3",
        again.pk: "edit of message 3 (2)",
        regenerated.pk: "new reply to message 3",
        restored.pk: "from “start”",
        plain.pk: "from message 1",
    }


def test_the_same_tree_gets_the_same_labels_whatever_its_ids(alice):
    """Labels come from the shape of the tree, never from database ids: a second session built
    the same way, whose rows have other ids, is labelled the same."""

    def build() -> list[str]:
        session = session_create(owner=alice, name="s")
        main = current_branch(session)
        say(main, "one", "reply one", "two", "reply two")
        main.refresh_from_db()
        _edit(main, 2, "edited")
        _edit(main, 2, "edited again")
        labels = session_branch_labels(session)
        return [labels[pk] for pk in sorted(labels)]

    first = build()
    for _ in range(3):  # other rows in between: the second session's ids are different
        session_create(owner=alice, name="filler")
    assert build() == first == ["main", "edit of message 3", "edit of message 3 (2)"]


def test_labels_stay_the_same_when_more_branches_come_and_a_name_wins(session, talked):
    edited = _edit(talked, 2, "edited")
    before = branch_label(edited)
    _edit(talked, 0, "first, edited")
    branch_fork(branch=edited, position=3)
    assert branch_label(edited) == before == "edit of message 3"
    branch_rename(branch=edited, name="the good one")
    assert session_branch_labels(session)[edited.pk] == "the good one"
    assert session_branch_labels(session)[talked.pk] == "main"


def _versions_on(session):
    branch = current_branch(session)
    history = branch_history(branch)
    branches = list(Branch.objects.filter(session=session))
    found = message_versions(branches, history, current=branch.pk)
    return {m.content: found[m.pk] for m in history if m.pk in found}


def test_an_edit_gives_the_user_message_two_versions_that_lead_to_each_other(session, talked):
    edited = _edit(talked, 2, "two, edited")
    on_edit = _versions_on(session)
    assert list(on_edit) == ["two, edited"]
    v = on_edit["two, edited"]
    assert (v.index, v.total, v.previous, v.next) == (2, 2, talked.pk, None)
    branch_activate(branch=talked)
    v = _versions_on(session)["two"]
    assert (v.index, v.total, v.previous, v.next) == (1, 2, None, edited.pk)


def test_a_message_without_other_versions_has_no_switcher(session, talked):
    branch_fork(branch=talked, position=4)  # a fork with no messages of its own yet
    assert _versions_on(session) == {}


def test_a_regenerated_reply_carries_the_switcher_not_the_repeated_question(session, talked):
    fork = branch_fork(branch=talked, position=2, metadata={"regenerated": 4})
    say(fork, "two", "another reply two")
    assert list(_versions_on(session)) == ["another reply two"]


def test_forks_of_a_different_prefix_are_not_versions(session, talked):
    """An edit of the first message makes a new prefix: the third message on it has no other
    version, even though main has a third message too."""
    _edit(talked, 0, "one, edited")
    assert list(_versions_on(session)) == ["one, edited"]


def test_switching_back_returns_to_the_newest_branch_showing_that_version(session, talked):
    edited = _edit(talked, 2, "two, edited")
    later = branch_fork(branch=edited, position=4)  # continues the edit further
    message_append(branch=later, role="user", content="three")
    branch_activate(branch=talked)
    v = _versions_on(session)["two"]
    assert v.next == later.pk
