from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import InternalSession
from sessions_app.selectors import branch_history
from sessions_app.services import branch_fork
from tests.conftest import contents, grow, say

pytestmark = pytest.mark.django_db


def test_history_of_a_new_branch_is_empty(branch):
    assert branch_history(branch) == []


def test_history_is_the_branch_messages_in_order(branch):
    say(branch, "hello", "hi there", "how are you", "fine")
    assert contents(branch_history(branch)) == ["hello", "hi there", "how are you", "fine"]
    assert [m.position for m in branch_history(branch)] == [0, 1, 2, 3]


def test_restored_branch_shares_parent_history_up_to_the_fork(branch):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="two")
    say(branch, "c", "d")
    child = checkpoint_restore(checkpoint=cp).branch
    say(child, "x", "y")
    assert contents(branch_history(child)) == ["a", "b", "x", "y"]
    branch.refresh_from_db()
    assert contents(branch_history(branch)) == ["a", "b", "c", "d"]


def test_branch_of_a_branch_reads_three_generations(branch):
    say(branch, "a", "b", "c", "d")
    cp1 = checkpoint_create(branch=branch, name="after-b")
    child = checkpoint_restore(checkpoint=checkpoint_create(branch=branch, name="end")).branch
    say(child, "e", "f")
    cp2 = checkpoint_create(branch=child, name="after-f")
    say(child, "g")
    grandchild = checkpoint_restore(checkpoint=cp2).branch
    say(grandchild, "h")
    assert contents(branch_history(grandchild)) == ["a", "b", "c", "d", "e", "f", "h"]
    child.refresh_from_db()
    assert contents(branch_history(child)) == ["a", "b", "c", "d", "e", "f", "g"]
    assert cp1.message_count == 4


def test_fork_below_the_parents_own_fork_reads_only_the_shared_part(branch):
    say(branch, "a", "b", "c", "d")
    child = branch_fork(branch=branch, position=4)
    say(child, "e", "f")
    # Fork the child at 2: inside what it inherited from its parent.
    grandchild = branch_fork(branch=child, position=2)
    say(grandchild, "z")
    assert contents(branch_history(grandchild)) == ["a", "b", "z"]


def test_history_range_is_a_page_of_positions(branch):
    say(branch, *[str(i) for i in range(10)])
    child = branch_fork(branch=branch, position=6)
    say(child, "x", "y")
    assert contents(branch_history(child, start=4, end=7)) == ["4", "5", "x"]
    assert contents(branch_history(child, start=7)) == ["y"]
    assert branch_history(child, start=8) == []
    assert contents(branch_history(child, end=3)) == ["0", "1", "2"]


@pytest.mark.parametrize("depth", [1, 5, 30])
def test_history_is_one_query_whatever_the_depth(branch, depth):
    leaf = branch
    for i in range(depth):
        say(leaf, f"q{i}", f"a{i}")
        leaf = branch_fork(branch=leaf, position=leaf.message_count)
    leaf.refresh_from_db()
    with CaptureQueriesContext(connection) as ctx:
        history = branch_history(leaf)
    assert len(ctx.captured_queries) == 1
    assert len(history) == 2 * depth
    assert history[-1].content == f"a{depth - 1}"


def test_history_of_ten_thousand_messages_is_one_query(branch):
    grow(branch, 10_000)
    child = branch_fork(branch=branch, position=9_990)
    say(child, "new")
    child.refresh_from_db()
    with CaptureQueriesContext(connection) as ctx:
        history = branch_history(child, start=9_985)
    assert len(ctx.captured_queries) == 1
    assert contents(history) == [f"message {i}" for i in range(9_985, 9_990)] + ["new"]
    assert InternalSession.objects.get(pk=child.pk).message_count == 9_991
