"""Rewrites at the same position coalesce: a path written (or deleted) again on the same branch
before the next message replaces its previous version when no checkpoint and no branch needs
it, so rewrites do not grow storage without bound; a version a checkpoint, a fork, a later
position or another turn still needs is kept, and nothing any branch or checkpoint shows
changes."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from checkpoints.selectors import checkpoint_files
from checkpoints.services import (
    branch_rewind,
    checkpoint_create,
    checkpoint_delete,
    checkpoint_restore,
)
from sessions_app.models import Branch
from sessions_app.services import branch_fork, message_append, session_create
from sessions_app.turns import turn_claim, turn_fail, turn_start
from tests.conftest import say
from workspace.models import FileVersion, WorkspaceBlob
from workspace.selectors import workspace_file, workspace_files
from workspace.services import file_delete, file_write

pytestmark = pytest.mark.django_db


def versions(branch, path: str = "a.txt") -> list[str]:
    """The contents of the branch's own versions of `path`, oldest first ("" a deletion)."""
    rows = FileVersion.objects.filter(branch=branch, path=path).order_by("id")
    return [v.blob.content if v.blob_id else "" for v in rows.select_related("blob")]


def read(branch, path: str = "a.txt", **kwargs) -> str:
    return workspace_file(branch, path, **kwargs)[1]


def test_a_hundred_rewrites_of_a_file_keep_one_version_and_one_content(branch):
    for i in range(100):
        file_write(branch=branch, path="a.txt", content=f"version {i} " + "x" * 1000)

    assert FileVersion.objects.filter(branch=branch).count() == 1
    assert WorkspaceBlob.objects.count() == 1
    assert read(branch).startswith("version 99 ")


def test_a_delete_replaces_a_write_at_the_same_position(branch):
    file_write(branch=branch, path="a.txt", content="one")
    file_delete(branch=branch, path="a.txt")

    assert versions(branch) == [""]
    assert not WorkspaceBlob.objects.exists()
    assert workspace_files(branch) == []


def test_a_content_another_version_uses_is_kept(branch):
    file_write(branch=branch, path="b.txt", content="shared")
    file_write(branch=branch, path="a.txt", content="shared")
    file_write(branch=branch, path="a.txt", content="mine")

    assert versions(branch) == ["mine"]
    assert read(branch, "b.txt") == "shared"


def test_a_version_a_checkpoint_holds_is_kept_until_the_checkpoint_goes(branch):
    file_write(branch=branch, path="a.txt", content="one")
    checkpoint = checkpoint_create(branch=branch, name="holds one")
    file_write(branch=branch, path="a.txt", content="two")
    file_write(branch=branch, path="a.txt", content="three")

    assert versions(branch) == ["one", "three"]
    assert read(branch, mark=checkpoint.files_mark) == "one"

    checkpoint_delete(checkpoint=checkpoint)
    file_write(branch=branch, path="a.txt", content="four")
    assert versions(branch) == ["one", "four"]  # "one" is not the previous version of "four"
    file_delete(branch=branch, path="a.txt")
    assert versions(branch) == ["one", ""]


def test_a_version_a_restored_branch_sees_is_kept_even_after_its_checkpoint_goes(branch):
    file_write(branch=branch, path="a.txt", content="one")
    checkpoint = checkpoint_create(branch=branch, name="cp")
    restored = checkpoint_restore(checkpoint=checkpoint).branch
    checkpoint_delete(checkpoint=checkpoint)

    file_write(branch=branch, path="a.txt", content="two")
    file_write(branch=branch, path="a.txt", content="three")

    assert versions(branch) == ["one", "three"]
    assert read(restored) == "one"


def test_a_version_an_edits_fork_sees_is_kept(branch):
    say(branch, "hello")
    file_write(branch=branch, path="a.txt", content="one")
    fork = branch_fork(branch=branch, position=1, make_current=False)

    file_write(branch=branch, path="a.txt", content="two")
    file_write(branch=branch, path="a.txt", content="three")

    assert versions(branch) == ["one", "three"]
    assert read(fork) == "one"


def test_a_write_after_a_message_keeps_the_version_before_it(branch):
    file_write(branch=branch, path="a.txt", content="one")
    say(branch, "a message")
    file_write(branch=branch, path="a.txt", content="two")
    file_write(branch=branch, path="a.txt", content="three")

    assert versions(branch) == ["one", "three"]
    branch_rewind(branch=branch, position=0)
    assert read(branch) == "one"


def test_a_version_a_later_position_would_cut_from_is_kept(branch):
    """A rewind to a checkpoint the agent made during a turn (at the turn's start, holding the
    files written so far) keeps versions written after the branch's new end; a rewrite at the
    new end still differs from the version before it for a rewind by position there."""
    say(branch, "a", "b")
    file_write(branch=branch, path="a.txt", content="at 2")
    message_append(branch=branch, role="user", content="c")
    file_write(branch=branch, path="later.txt", content="at 3")
    during = checkpoint_create(branch=branch, name="during", at=2)
    message_append(branch=branch, role="assistant", content="d")
    checkpoint_restore(checkpoint=during, mode="rewind")
    checkpoint_delete(checkpoint=during)

    file_write(branch=branch, path="a.txt", content="again at 2")
    file_write(branch=branch, path="a.txt", content="third at 2")

    assert versions(branch) == ["at 2", "third at 2"]
    branch_rewind(branch=branch, position=2)
    assert read(branch) == "at 2"


def test_a_turns_write_never_replaces_a_persons_but_a_persons_replaces_a_turns(session, branch):
    turn = turn_claim(turn_id=turn_start(session=session, message="write").pk)
    assert turn is not None
    file_write(branch=branch, path="a.txt", content="by a person")
    file_write(branch=branch, path="a.txt", content="by the agent", turn=turn, by="agent")
    file_write(branch=branch, path="a.txt", content="by the agent, again", turn=turn, by="agent")
    file_write(branch=branch, path="b.txt", content="by the agent", turn=turn, by="agent")
    file_write(branch=branch, path="b.txt", content="by a person, after")

    assert versions(branch) == ["by a person", "by the agent, again"]
    assert versions(branch, "b.txt") == ["by a person, after"]
    assert turn_fail(turn=turn, error="gone")
    assert read(branch) == "by a person"
    assert read(branch, "b.txt") == "by a person, after"


def test_coalescing_costs_the_same_whatever_the_history(alice):
    def cost(n: int) -> int:
        branch = Branch.objects.get(session=session_create(owner=alice, name=str(n)))
        for i in range(n):
            file_write(branch=branch, path=f"f{i}.txt", content=str(i))
            if i % 10 == 0:
                checkpoint_create(branch=branch, name=f"cp {i}", is_auto=True)
                say(branch, f"message {i}")
        file_write(branch=branch, path="a.txt", content="one")
        with CaptureQueriesContext(connection) as queries:
            file_write(branch=branch, path="a.txt", content="two")
        assert versions(branch) == ["two"]
        return len(queries.captured_queries)

    assert cost(2) == cost(60)


def test_coalescing_changes_no_checkpoint(branch):
    file_write(branch=branch, path="a.txt", content="one")
    first = checkpoint_create(branch=branch, name="first")
    file_write(branch=branch, path="a.txt", content="two")
    file_write(branch=branch, path="b.txt", content="b")
    second = checkpoint_create(branch=branch, name="second")
    file_write(branch=branch, path="a.txt", content="three")
    file_write(branch=branch, path="a.txt", content="four")
    file_delete(branch=branch, path="b.txt")

    assert versions(branch) == ["one", "two", "four"]
    assert [f.path for f in checkpoint_files(first)] == ["a.txt"]
    assert read(branch, mark=first.files_mark) == "one"
    assert read(branch, mark=second.files_mark) == "two"
    assert read(branch, "b.txt", mark=second.files_mark) == "b"
    assert [f.path for f in workspace_files(branch)] == ["a.txt"]
