"""The workspace goes back with the conversation: a checkpoint captures it, a restore as a branch
brings it back on a new branch (the old branch keeps its later files), a rewind deletes the later
versions (and the contents only they used), and every fork (a restore, an edit) sees its parent's
files up to the fork point, never the parent's later writes."""

from __future__ import annotations

import pytest

from agents.services import turn_edit
from checkpoints.selectors import checkpoint_files
from checkpoints.services import branch_rewind, checkpoint_create, checkpoint_restore
from sessions_app.models import Message
from sessions_app.services import message_append
from tests.conftest import say
from workspace.models import FileVersion, WorkspaceBlob
from workspace.selectors import files_change, workspace_file, workspace_files
from workspace.services import file_delete, file_write

pytestmark = pytest.mark.django_db


def files(branch, **kwargs) -> dict[str, str]:
    """path -> content, as the branch's workspace stands."""
    return {f.path: workspace_file(branch, f.path, **kwargs)[1] for f in workspace_files(branch)}


@pytest.fixture
def checkpointed(branch):
    """Files, a checkpoint, then more messages and changes: one changed, one deleted, one new."""
    say(branch, "write the plan", "done")
    file_write(branch=branch, path="plan.md", content="v1")
    file_write(branch=branch, path="notes/old.txt", content="old")
    file_write(branch=branch, path="shared.txt", content="kept")
    checkpoint = checkpoint_create(branch=branch, name="plan v1")
    say(branch, "change it", "changed")
    file_write(branch=branch, path="plan.md", content="v2")
    file_delete(branch=branch, path="notes/old.txt")
    file_write(branch=branch, path="new.txt", content="only later")
    file_write(branch=branch, path="copy.txt", content="kept")  # a later path, an older content
    return checkpoint


AT_CHECKPOINT = {"notes/old.txt": "old", "plan.md": "v1", "shared.txt": "kept"}
LATER = {"copy.txt": "kept", "new.txt": "only later", "plan.md": "v2", "shared.txt": "kept"}


def test_a_checkpoint_keeps_the_files_as_they_were(branch, checkpointed):
    assert [f.path for f in checkpoint_files(checkpointed)] == sorted(AT_CHECKPOINT)
    assert files(branch) == LATER


def test_restore_as_branch_brings_the_files_back_and_the_old_branch_keeps_its_later_files(
    branch, checkpointed
):
    restored = checkpoint_restore(checkpoint=checkpointed).branch

    assert files(restored) == AT_CHECKPOINT
    assert files(branch) == LATER
    assert FileVersion.objects.filter(branch=restored).count() == 0  # nothing copied


def test_rewind_deletes_the_later_versions_and_the_contents_only_they_used(branch, checkpointed):
    result = checkpoint_restore(checkpoint=checkpointed, mode="rewind")

    assert result.branch.pk == branch.pk
    assert files(branch) == AT_CHECKPOINT
    assert FileVersion.objects.filter(branch=branch).count() == 3
    contents = sorted(WorkspaceBlob.objects.values_list("content", flat=True))
    assert contents == ["kept", "old", "v1"]  # "v2" and "only later" are gone, "kept" stays


def test_a_branch_made_by_a_restore_sees_its_parent_up_to_the_fork_not_later(branch, checkpointed):
    restored = checkpoint_restore(checkpoint=checkpointed).branch
    file_write(branch=branch, path="plan.md", content="v3 on the old branch")
    file_write(branch=branch, path="parent-only.txt", content="after the fork")
    file_write(branch=restored, path="child-only.txt", content="on the new branch")

    assert files(restored) == {**AT_CHECKPOINT, "child-only.txt": "on the new branch"}
    assert "child-only.txt" not in files(branch)
    assert files(branch)["plan.md"] == "v3 on the old branch"


def test_a_branch_of_a_branch_reads_along_its_whole_lineage(branch, checkpointed):
    child = checkpoint_restore(checkpoint=checkpointed).branch
    file_delete(branch=child, path="shared.txt")
    file_write(branch=child, path="child.txt", content="child")
    in_child = checkpoint_create(branch=child, name="in the child")
    file_write(branch=child, path="child.txt", content="child, later")
    grandchild = checkpoint_restore(checkpoint=in_child).branch
    file_write(branch=branch, path="notes/old.txt", content="parent again")

    expected = {"child.txt": "child", "notes/old.txt": "old", "plan.md": "v1"}
    assert files(grandchild) == expected
    assert {f.path for f in checkpoint_files(in_child)} == set(expected)
    assert files(child)["child.txt"] == "child, later"


def test_restoring_a_checkpoint_twice_gives_the_same_files(branch, checkpointed):
    first = checkpoint_restore(checkpoint=checkpointed).branch
    file_write(branch=first, path="plan.md", content="edited on the first")
    second = checkpoint_restore(checkpoint=checkpointed).branch

    assert files(second) == AT_CHECKPOINT


def test_the_restore_dialog_can_say_which_files_come_back(branch, checkpointed):
    change = files_change(workspace_files(branch), checkpoint_files(checkpointed))

    assert change.added == ["notes/old.txt"]
    assert change.removed == ["copy.txt", "new.txt"]
    assert change.changed == ["plan.md"]


def test_a_rewind_by_position_drops_the_files_written_after_that_message(branch):
    say(branch, "first", "answer")
    file_write(branch=branch, path="early.txt", content="early")
    say(branch, "second", "answer")
    file_write(branch=branch, path="late.txt", content="late")

    branch_rewind(branch=branch, position=2)

    assert files(branch) == {"early.txt": "early"}


def test_a_fork_by_edit_sees_the_files_written_before_the_edited_message(session, branch):
    say(branch, "make a file", "made")
    file_write(branch=branch, path="before.txt", content="before")
    asked = message_append(branch=branch, role="user", content="now change it")
    # The agent answering that message writes at the position after it.
    file_write(branch=branch, path="before.txt", content="changed by the answer")
    file_write(branch=branch, path="after.txt", content="written by the answer")
    message_append(branch=branch, role="assistant", content="changed")

    turn = turn_edit(session=session, message_id=asked.pk, text="do something else")

    assert turn.branch_id != branch.pk
    edited = turn.branch
    assert files(edited) == {"before.txt": "before"}
    assert Message.objects.filter(branch=edited).count() == 1  # the edited message
    assert files(branch)["before.txt"] == "changed by the answer"
