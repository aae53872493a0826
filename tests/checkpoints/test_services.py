from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from checkpoints.errors import CheckpointNotFound
from checkpoints.models import Checkpoint
from checkpoints.selectors import (
    find_session_checkpoint,
    get_checkpoint_for_user,
    lineage_checkpoints,
    rewind_preview,
    session_checkpoints,
)
from checkpoints.services import (
    branch_rewind,
    checkpoint_cleanup_auto,
    checkpoint_create,
    checkpoint_delete,
    checkpoint_restore,
)
from core.errors import InvalidInput, TooLarge
from sessions_app.errors import BranchNotFound, RewindOutOfRange
from sessions_app.models import Branch, Message
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import (
    branch_activate,
    branch_set_state,
    message_append,
    session_create,
)
from tests.conftest import contents, grow, say
from workspace.selectors import workspace_file, workspace_files
from workspace.services import file_delete, file_write

pytestmark = pytest.mark.django_db


# --- create, inspect, delete -----------------------------------------------------------------


def test_checkpoint_marks_the_position_and_state_without_copying(branch):
    say(branch, "a", "b")
    branch_set_state(branch=branch, session_state={"topic": "python"})
    messages_before = Message.objects.count()
    cp = checkpoint_create(branch=branch, name="after-intro", description="intro done")
    assert (cp.message_count, cp.session_state, cp.is_auto) == (2, {"topic": "python"}, False)
    assert Message.objects.count() == messages_before
    branch.refresh_from_db()
    assert branch.checkpoint_count == 1


def test_checkpoint_without_a_name_is_named_by_time(branch):
    assert checkpoint_create(branch=branch).checkpoint_name.startswith("checkpoint-")


def test_checkpoint_name_over_200_characters_is_refused(branch):
    with pytest.raises(InvalidInput, match="limit is 200"):
        checkpoint_create(branch=branch, name="n" * 201)
    assert not Checkpoint.objects.exists()
    branch.refresh_from_db()
    assert branch.checkpoint_count == 0


def test_checkpoint_metadata_is_checked_and_held_to_the_limit(branch, settings):
    settings.ROLLBACK_METADATA_MAX_BYTES = 100
    with pytest.raises(InvalidInput, match="The checkpoint metadata cannot contain NUL"):
        checkpoint_create(branch=branch, name="cp", metadata={"a": "\x00"})
    with pytest.raises(TooLarge, match="The checkpoint metadata is 108 bytes"):
        checkpoint_create(branch=branch, name="cp", metadata={"blob": "x" * 97})
    assert not Checkpoint.objects.exists()
    branch.refresh_from_db()
    assert branch.checkpoint_count == 0


def test_checkpoint_of_a_deleted_branch_is_refused(branch):
    Branch.objects.filter(pk=branch.pk).delete()
    with pytest.raises(BranchNotFound):
        checkpoint_create(branch=branch, name="x")


def test_automatic_checkpoint_keeps_its_metadata(branch):
    say(branch, "calc", "5")
    cp = checkpoint_create(
        branch=branch,
        name="after-calculate",
        is_auto=True,
        metadata={"trigger": "tool_call", "tool_name": "calculate", "message_count": 2},
    )
    assert cp.is_auto
    assert cp.metadata["tool_name"] == "calculate"


def test_delete_keeps_messages_and_fixes_the_count(branch):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="one")
    checkpoint_create(branch=branch, name="two")
    checkpoint_delete(checkpoint=cp)
    branch.refresh_from_db()
    assert branch.checkpoint_count == 1
    assert Message.objects.count() == 2
    with pytest.raises(CheckpointNotFound):
        checkpoint_delete(checkpoint=cp)


def test_another_users_checkpoint_is_not_found(branch, bob):
    cp = checkpoint_create(branch=branch, name="mine")
    with pytest.raises(CheckpointNotFound):
        get_checkpoint_for_user(bob, cp.pk)
    with pytest.raises(CheckpointNotFound):
        get_checkpoint_for_user(bob, 999_999)


def test_session_checkpoints_lists_every_branch_newest_first(session, branch):
    say(branch, "a", "b")
    first = checkpoint_create(branch=branch, name="first")
    child = checkpoint_restore(checkpoint=first).branch
    second = checkpoint_create(branch=child, name="second")
    assert [c.pk for c in session_checkpoints(session)] == [second.pk, first.pk]
    assert [c.pk for c in session_checkpoints(session, branch=branch)] == [first.pk]


# --- restore as a branch ---------------------------------------------------------------------


def test_restore_as_branch_keeps_the_old_branch(session, branch):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="two")
    say(branch, "c", "d")
    branch_set_state(branch=branch, session_state={"step": 2})
    result = checkpoint_restore(checkpoint=cp)
    new = result.branch
    assert result.deleted_checkpoints == []
    assert (new.parent_id, new.fork_position, new.forked_from_id) == (branch.pk, 2, cp.pk)
    assert current_branch(session).pk == new.pk
    assert new.session_state == {}
    branch.refresh_from_db()
    assert not branch.is_current
    assert contents(branch_history(branch)) == ["a", "b", "c", "d"]
    assert contents(branch_history(new)) == ["a", "b"]


def test_restore_on_a_branch_made_by_a_restore(session, branch):
    say(branch, "a", "b")
    cp1 = checkpoint_create(branch=branch, name="cp1")
    say(branch, "c")
    b2 = checkpoint_restore(checkpoint=cp1).branch
    say(b2, "x", "y")
    cp2 = checkpoint_create(branch=b2, name="cp2")
    say(b2, "z")
    b3 = checkpoint_restore(checkpoint=cp2).branch
    say(b3, "w")
    assert contents(branch_history(b3)) == ["a", "b", "x", "y", "w"]
    assert b3.parent_id == b2.pk
    assert Branch.objects.filter(session=session).count() == 3


def test_restore_through_a_session_refuses_another_sessions_checkpoint(alice, branch):
    cp = checkpoint_create(branch=branch, name="here")
    other = session_create(owner=alice, name="other")
    with pytest.raises(CheckpointNotFound):
        checkpoint_restore(checkpoint=cp, session=other)
    assert Branch.objects.count() == 2  # the two sessions' first branches only


def test_restoring_a_deleted_checkpoint_says_so(branch):
    cp = checkpoint_create(branch=branch, name="gone")
    checkpoint_delete(checkpoint=cp)
    with pytest.raises(CheckpointNotFound, match="no longer exists"):
        checkpoint_restore(checkpoint=cp)
    assert Branch.objects.count() == 1


def test_unknown_restore_mode_is_refused(branch):
    cp = checkpoint_create(branch=branch, name="cp")
    with pytest.raises(InvalidInput, match="restore mode"):
        checkpoint_restore(checkpoint=cp, mode="sideways")
    assert Branch.objects.count() == 1


# --- rewind --------------------------------------------------------------------------------


def test_rewind_discards_later_messages_and_checkpoints(session, branch):
    say(branch, "a", "b")
    branch_set_state(branch=branch, session_state={"v": 1})
    keep_early = checkpoint_create(branch=branch, name="early")
    say(branch, "c", "d")
    target = checkpoint_create(branch=branch, name="target")
    say(branch, "e", "f")
    branch_set_state(branch=branch, session_state={"v": 3})
    later = checkpoint_create(branch=branch, name="later")
    result = checkpoint_restore(checkpoint=target, mode="rewind")
    assert result.branch.pk == branch.pk
    assert [d.id for d in result.deleted_checkpoints] == [later.pk]
    branch.refresh_from_db()
    assert contents(branch_history(branch)) == ["a", "b", "c", "d"]
    assert branch.message_count == 4
    assert branch.checkpoint_count == 2
    assert branch.session_state == {"v": 1}
    assert set(Checkpoint.objects.values_list("pk", flat=True)) == {keep_early.pk, target.pk}
    assert current_branch(session).pk == branch.pk


def test_rewind_deletes_branches_forked_from_the_discarded_part(session, branch):
    say(branch, "a", "b")
    target = checkpoint_create(branch=branch, name="target")
    say(branch, "c", "d")
    late = checkpoint_create(branch=branch, name="late")
    doomed = checkpoint_restore(checkpoint=late).branch  # forks at 4: inherits c, d
    say(doomed, "e")
    doomed_cp = checkpoint_create(branch=doomed, name="on-doomed")
    grandchild = checkpoint_restore(checkpoint=doomed_cp).branch
    kept = checkpoint_restore(checkpoint=target).branch  # forks at 2: inherits only a, b
    say(kept, "k")
    result = checkpoint_restore(checkpoint=target, mode="rewind")
    deleted = {d.id for d in result.deleted_checkpoints}
    assert deleted == {late.pk, doomed_cp.pk}
    remaining = set(Branch.objects.filter(session=session).values_list("pk", flat=True))
    assert remaining == {branch.pk, kept.pk}
    assert not Branch.objects.filter(pk__in=[doomed.pk, grandchild.pk]).exists()
    kept.refresh_from_db()
    assert contents(branch_history(kept)) == ["a", "b", "k"]
    assert current_branch(session).pk == branch.pk


def test_rewind_of_a_restored_branch_keeps_its_parent(branch):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="cp")
    child = checkpoint_restore(checkpoint=cp).branch
    say(child, "x")
    at_x = checkpoint_create(branch=child, name="at-x")
    say(child, "y", "z")
    checkpoint_restore(checkpoint=at_x, mode="rewind")
    child.refresh_from_db()
    assert contents(branch_history(child)) == ["a", "b", "x"]
    branch.refresh_from_db()
    assert contents(branch_history(branch)) == ["a", "b"]


def test_rewind_below_zero_or_into_inherited_history_is_refused(branch):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="cp")
    child = checkpoint_restore(checkpoint=cp).branch
    say(child, "x")
    with pytest.raises(RewindOutOfRange, match="below the start"):
        branch_rewind(branch=branch, position=-1)
    with pytest.raises(RewindOutOfRange):
        branch_rewind(branch=child, position=1)  # message 1 belongs to the parent
    with pytest.raises(RewindOutOfRange):
        branch_rewind(branch=child, position=4)
    child.refresh_from_db()
    assert contents(branch_history(child)) == ["a", "b", "x"]


def test_rewind_by_position_cuts_the_branch(branch):
    say(branch, "a", "b", "c")
    deleted = branch_rewind(branch=branch, position=1)
    assert deleted == []
    branch.refresh_from_db()
    assert contents(branch_history(branch)) == ["a"]


def files_of(branch, mark=None) -> dict[str, str]:
    """path -> content of the branch's workspace (as of `mark`)."""
    return {
        f.path: workspace_file(branch, f.path, mark=mark)[1]
        for f in workspace_files(branch, mark=mark)
    }


@pytest.fixture
def edited_between(branch):
    """Two checkpoints at the same message count with only file edits between them (the Files
    panel, PUT or DELETE on the files API), and a branch restored from the second."""
    say(branch, "write the plan")
    file_write(branch=branch, path="plan.md", content="v0")
    early = checkpoint_create(branch=branch, name="early")
    checkpoint_restore(checkpoint=early)  # a branch that holds nothing a rewind to `first` deletes
    say(branch, "done")
    file_write(branch=branch, path="plan.md", content="v1")
    file_write(branch=branch, path="old.txt", content="old")
    first = checkpoint_create(branch=branch, name="first")
    file_write(branch=branch, path="plan.md", content="v2")
    file_delete(branch=branch, path="old.txt")
    second = checkpoint_create(branch=branch, name="second")
    from_second = checkpoint_restore(checkpoint=second).branch
    branch_activate(branch=branch)
    return first, second, from_second


def test_a_rewind_deletes_a_checkpoint_at_its_position_that_holds_files_it_deletes(
    session, branch, edited_between
):
    first, second, from_second = edited_between
    assert files_of(from_second) == {"plan.md": "v2"}
    branches = set(Branch.objects.filter(session=session).values_list("pk", flat=True))

    result = checkpoint_restore(checkpoint=first, mode="rewind")

    assert [d.id for d in result.deleted_checkpoints] == [second.pk]
    assert not Checkpoint.objects.filter(pk=second.pk).exists()
    assert Checkpoint.objects.filter(branch__session=session).count() == 2  # early, first
    remaining = set(Branch.objects.filter(session=session).values_list("pk", flat=True))
    assert remaining == branches - {from_second.pk}
    assert files_of(branch) == {"old.txt": "old", "plan.md": "v1"}
    assert contents(branch_history(branch)) == ["write the plan", "done"]


def views(session) -> dict[str, tuple[list[str], dict[str, str]]]:
    """What every checkpoint and branch of the session shows: its messages and its files."""
    shown = {}
    for cp in Checkpoint.objects.filter(branch__session=session).select_related("branch"):
        history = branch_history(cp.branch, end=cp.message_count)
        shown[f"checkpoint {cp.checkpoint_name}"] = (contents(history), checkpoint_files_of(cp))
    for b in Branch.objects.filter(session=session):
        shown[f"branch {b.pk}"] = (contents(branch_history(b)), files_of(b))
    return shown


def test_a_rewind_never_changes_what_a_kept_checkpoint_or_branch_shows(
    session, branch, edited_between
):
    first, _, _ = edited_between
    before = views(session)

    checkpoint_restore(checkpoint=first, mode="rewind")

    after = views(session)
    del before[f"branch {branch.pk}"], after[f"branch {branch.pk}"]
    assert {name: before[name] for name in after} == after


def test_a_rewind_to_the_later_checkpoint_at_a_position_keeps_the_earlier_one(
    branch, edited_between
):
    first, second, from_second = edited_between
    from_first = checkpoint_restore(checkpoint=first).branch
    file_write(branch=branch, path="after.txt", content="after the second")
    third = checkpoint_create(branch=branch, name="third")

    result = checkpoint_restore(checkpoint=second, mode="rewind")

    assert [d.id for d in result.deleted_checkpoints] == [third.pk]
    assert checkpoint_files_of(first) == {"old.txt": "old", "plan.md": "v1"}
    assert checkpoint_files_of(second) == {"plan.md": "v2"}
    assert files_of(from_first) == {"old.txt": "old", "plan.md": "v1"}
    assert files_of(from_second) == {"plan.md": "v2"}
    assert files_of(branch) == {"plan.md": "v2"}


def test_the_rewind_preview_counts_what_the_rewind_deletes(branch, edited_between):
    first, _, _ = edited_between
    say(branch, "c", "d")
    file_write(branch=branch, path="later.txt", content="later")

    preview = rewind_preview(first)
    before = Message.objects.count(), Branch.objects.count()
    deleted = checkpoint_restore(checkpoint=first, mode="rewind").deleted_checkpoints

    assert preview == {
        "messages": 2,
        "checkpoints": 1,
        "branches": 1,
        "files": 3,
        "own_files": 3,  # all written by a person (file_write without a turn)
    }
    assert len(deleted) == preview["checkpoints"]
    gone = before[0] - Message.objects.count(), before[1] - Branch.objects.count()
    assert gone == (preview["messages"], preview["branches"])


def test_a_rewind_by_position_deletes_a_checkpoint_that_holds_later_files(branch):
    """A checkpoint the agent makes during a turn sits before the turn's message but holds the
    files the agent wrote so far: cutting the branch back to its position deletes those files,
    so it goes too."""
    say(branch, "a", "b")
    message_append(branch=branch, role="user", content="write it")
    file_write(branch=branch, path="out.txt", content="by the turn")
    during = checkpoint_create(branch=branch, name="during the turn", at=2)
    child = checkpoint_restore(checkpoint=during).branch
    assert files_of(child) == {"out.txt": "by the turn"}

    deleted = branch_rewind(branch=branch, position=2)

    assert [d.id for d in deleted] == [during.pk]
    assert not Branch.objects.filter(pk=child.pk).exists()
    assert files_of(branch) == {}


def checkpoint_files_of(checkpoint) -> dict[str, str]:
    checkpoint.refresh_from_db()
    return files_of(checkpoint.branch, mark=checkpoint.files_mark)


# --- cost does not grow with the conversation --------------------------------------------------


def _conversation(owner, size: int):
    """A branch of `size` messages with one checkpoint four messages before its end."""
    b = current_branch(session_create(owner=owner, name=f"{size} messages"))
    grow(b, size - 4)
    cp = checkpoint_create(branch=b, name="four-back")
    say(b, "w", "x", "y", "z")
    b.refresh_from_db()
    return b, cp


def _cost(action) -> int:
    """Queries issued by `action`; it must write no message row."""
    messages_before = Message.objects.count()
    with CaptureQueriesContext(connection) as ctx:
        action()
    table = Message._meta.db_table
    writes = [
        q["sql"]
        for q in ctx.captured_queries
        if table in q["sql"] and q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE"))
    ]
    assert writes == []
    assert Message.objects.count() <= messages_before
    return len(ctx.captured_queries)


# The conversations compared (docs/architecture.md quotes them).
FEW_MESSAGES, MANY_MESSAGES = 10, 10_000


def test_creating_a_checkpoint_costs_the_same_at_10_and_10000_messages(alice):
    costs = []
    for size in (FEW_MESSAGES, MANY_MESSAGES):
        b, _ = _conversation(alice, size)
        costs.append(_cost(lambda b=b: checkpoint_create(branch=b, name="now")))
        assert Message.objects.filter(branch=b).count() == size
    assert costs[0] == costs[1]


def test_restoring_as_a_branch_costs_the_same_at_10_and_10000_messages(alice):
    costs = []
    for size in (FEW_MESSAGES, MANY_MESSAGES):
        b, cp = _conversation(alice, size)
        messages = Message.objects.count()
        costs.append(_cost(lambda cp=cp: checkpoint_restore(checkpoint=cp)))
        assert Message.objects.count() == messages
        assert len(branch_history(current_branch(b.session))) == size - 4
    assert costs[0] == costs[1]


def test_rewinding_costs_the_same_at_10_and_10000_messages(alice):
    costs = []
    for size in (FEW_MESSAGES, MANY_MESSAGES):
        b, cp = _conversation(alice, size)
        costs.append(_cost(lambda cp=cp: checkpoint_restore(checkpoint=cp, mode="rewind")))
        b.refresh_from_db()
        assert b.message_count == size - 4
        assert Message.objects.filter(branch=b).count() == size - 4
    assert costs[0] == costs[1]


# --- retention -------------------------------------------------------------------------------


def test_cleanup_keeps_the_latest_automatic_checkpoints_per_branch(session, branch):
    say(branch, "a", "b")
    manual = checkpoint_create(branch=branch, name="manual")
    autos = [checkpoint_create(branch=branch, name=f"auto-{i}", is_auto=True) for i in range(5)]
    other = checkpoint_restore(checkpoint=manual).branch
    other_autos = [checkpoint_create(branch=other, name=f"o-{i}", is_auto=True) for i in range(3)]
    deleted = checkpoint_cleanup_auto(keep_latest=2)
    assert deleted == 3 + 1
    left = set(Checkpoint.objects.values_list("pk", flat=True))
    assert left == {manual.pk, autos[3].pk, autos[4].pk, other_autos[1].pk, other_autos[2].pk}
    branch.refresh_from_db()
    other.refresh_from_db()
    assert (branch.checkpoint_count, other.checkpoint_count) == (3, 2)


def test_cleanup_of_one_branch_leaves_the_others(branch):
    cp = checkpoint_create(branch=branch, name="m")
    checkpoint_create(branch=branch, name="a1", is_auto=True)
    other = checkpoint_restore(checkpoint=cp).branch
    checkpoint_create(branch=other, name="o1", is_auto=True)
    assert checkpoint_cleanup_auto(keep_latest=0, branch=branch) == 1
    assert Checkpoint.objects.filter(branch=other, is_auto=True).count() == 1


@pytest.mark.parametrize("bad", [-1, "3", 2.5, True, None])
def test_cleanup_refuses_a_bad_keep_count(branch, bad):
    checkpoint_create(branch=branch, name="a", is_auto=True)
    with pytest.raises(InvalidInput):
        checkpoint_cleanup_auto(keep_latest=bad)
    assert Checkpoint.objects.count() == 1


# --- names -----------------------------------------------------------------------------------


def test_a_manual_checkpoint_with_a_taken_name_gets_a_number(session, branch):
    first = checkpoint_create(branch=branch, name="dup")
    second = checkpoint_create(branch=branch, name="dup")
    third = checkpoint_create(branch=branch, name="DUP")
    other = session_create(owner=session.owner, name="other")
    elsewhere = checkpoint_create(branch=current_branch(other), name="dup")
    assert [first.checkpoint_name, second.checkpoint_name, third.checkpoint_name] == [
        "dup",
        "dup (2)",
        "DUP (3)",
    ]
    assert elsewhere.checkpoint_name == "dup"  # unique within a session, not across sessions
    assert find_session_checkpoint(session, "dup (2)") == second


def test_a_suffixed_name_stays_within_the_limit(branch):
    long = "n" * 200
    checkpoint_create(branch=branch, name=long)
    again = checkpoint_create(branch=branch, name=long)
    assert again.checkpoint_name == "n" * 196 + " (2)"


def test_automatic_checkpoints_are_named_apart_too(branch):
    names = [
        checkpoint_create(branch=branch, name="after-write_file", is_auto=True).checkpoint_name
        for _ in range(3)
    ]
    assert names == ["after-write_file", "after-write_file (2)", "after-write_file (3)"]


def named(checkpoint: Checkpoint, name: str) -> Checkpoint:
    """The checkpoint under a name another one has: as an import, or checkpoints made before
    names were unique, can leave them."""
    Checkpoint.objects.filter(pk=checkpoint.pk).update(checkpoint_name=name)
    checkpoint.refresh_from_db()
    return checkpoint


def test_a_name_resolves_to_the_newest_in_the_current_line_before_the_session(session, branch):
    say(branch, "a", "b")
    old = checkpoint_create(branch=branch, name="after-calculate", is_auto=True)
    fork = checkpoint_create(branch=branch, name="fork")
    say(branch, "c", "d")
    on_main = named(checkpoint_create(branch=branch, name="x", is_auto=True), "after-calculate")
    new_branch = checkpoint_restore(checkpoint=fork).branch
    # The newest of that name in the session is on main, after the fork: not this line's.
    assert find_session_checkpoint(session, "after-calculate") == on_main
    assert find_session_checkpoint(session, "after-calculate", branch=new_branch) == old
    assert set(lineage_checkpoints(new_branch)) == {old, fork}
    say(new_branch, "e")
    mine = named(checkpoint_create(branch=new_branch, name="y", is_auto=True), "after-calculate")
    assert find_session_checkpoint(session, "AFTER-calculate", branch=new_branch) == mine
    # A name only found off this line still resolves, to the newest in the session.
    checkpoint_create(branch=branch, name="only-on-main")
    assert find_session_checkpoint(session, "only-on-main", branch=new_branch).branch == branch
