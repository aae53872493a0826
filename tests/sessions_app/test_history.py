from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import Branch, Message
from sessions_app.selectors import branch_history
from sessions_app.services import branch_fork, message_append
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


# What a page of a branch's history costs, whatever its depth and length (docs/architecture.md
# quotes it).
HISTORY_QUERIES = 1


@pytest.mark.parametrize("depth", [1, 5, 30])
def test_history_is_one_query_whatever_the_depth(branch, depth):
    leaf = branch
    for i in range(depth):
        say(leaf, f"q{i}", f"a{i}")
        leaf = branch_fork(branch=leaf, position=leaf.message_count)
    leaf.refresh_from_db()
    with CaptureQueriesContext(connection) as ctx:
        history = branch_history(leaf)
    assert len(ctx.captured_queries) == HISTORY_QUERIES
    assert len(history) == 2 * depth
    assert history[-1].content == f"a{depth - 1}"


def test_history_of_ten_thousand_messages_is_one_query(branch):
    grow(branch, 10_000)
    child = branch_fork(branch=branch, position=9_990)
    say(child, "new")
    child.refresh_from_db()
    with CaptureQueriesContext(connection) as ctx:
        history = branch_history(child, start=9_985)
    assert len(ctx.captured_queries) == HISTORY_QUERIES
    assert contents(history) == [f"message {i}" for i in range(9_985, 9_990)] + ["new"]
    assert Branch.objects.get(pk=child.pk).message_count == 9_991


def _as_the_orm_reads_it(branch: Branch) -> list[Message]:
    """The branch's history read the plain ORM way, branch by branch up the lineage: the
    reference the one-query reader must match exactly."""
    parts: list[Message] = []
    upper = branch.message_count
    current: Branch | None = branch
    while current is not None:
        parts[:0] = Message.objects.filter(branch=current, position__lt=upper).order_by("position")
        if current.parent_id is None:
            break
        upper = min(upper, current.fork_position)
        current = Branch.objects.get(pk=current.parent_id)
    return parts


def _fields(message: Message) -> dict:
    return {f.attname: getattr(message, f.attname) for f in Message._meta.concrete_fields}


def test_history_rows_are_exactly_what_the_orm_reads_across_three_generations(branch):
    say(branch, "a", "b")
    message_append(
        branch=branch,
        role="assistant",
        content="",
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "calculate"}}],
        metadata={"model": "m", "nested": {"é": [1, 2.5, None, True]}},
    )
    message_append(
        branch=branch,
        role="tool",
        tool_name="calculate",
        tool_args={"expression": "6*7"},
        tool_result="42",
        tool_call_id="c1",
    )
    say(branch, "c", "d")
    child = branch_fork(branch=branch, position=5)
    say(child, "e", "f")
    grandchild = branch_fork(branch=child, position=7)
    say(grandchild, "g")
    message_append(branch=grandchild, role="assistant", content="h", tool_args=[], metadata={})
    for b in (branch, child, grandchild):
        b.refresh_from_db()
        read, expected = branch_history(b), _as_the_orm_reads_it(b)
        assert [_fields(m) for m in read] == [_fields(m) for m in expected]
        assert [type(_fields(m)["created_at"]) for m in read] == [
            type(_fields(m)["created_at"]) for m in expected
        ]
        for m in read:
            assert m._state.adding is False
            assert m._state.db == "default"
            assert m.branch.session_id == b.session_id  # relations load as the ORM's would
    # A page of the grandchild's history across its three generations.
    page = branch_history(grandchild, start=3, end=8)
    assert [_fields(m) for m in page] == [_fields(m) for m in _as_the_orm_reads_it(grandchild)[3:8]]
    assert [m.tool_args for m in page][:1] == [{"expression": "6*7"}]
