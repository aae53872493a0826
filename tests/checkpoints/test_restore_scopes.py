"""Restore scopes (checkpoints.services.checkpoint_restore's `scope`): the conversation and the
files together (`all`, the default), the conversation only (the workspace shown stays), or the
files only (the conversation stays; a new version of each changed file, as the user's write),
each in both modes, each at the same cost whatever the history's length."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from checkpoints.models import Checkpoint
from checkpoints.selectors import rewind_preview
from checkpoints.services import checkpoint_create, checkpoint_restore
from core import events
from core.errors import InvalidInput
from sessions_app.models import Branch, Message
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import branch_activate, branch_fork, branch_set_state
from tests.conftest import contents, grow, say
from workspace.models import FileVersion
from workspace.selectors import fork_mark, workspace_file, workspace_files
from workspace.services import file_delete, file_write

pytestmark = pytest.mark.django_db


def files_of(branch, mark=None) -> dict[str, str]:
    return {
        f.path: workspace_file(branch, f.path, mark=mark)[1]
        for f in workspace_files(branch, mark=mark)
    }


@pytest.fixture
def worked(branch):
    """A checkpoint after two messages and two files, then two more messages, one file
    changed, one deleted, one added, and a new session state."""
    say(branch, "plan it", "planned")
    branch_set_state(branch=branch, session_state={"step": 1})
    file_write(branch=branch, path="plan.md", content="v1")
    file_write(branch=branch, path="old.txt", content="old")
    checkpoint = checkpoint_create(branch=branch, name="planned")
    say(branch, "build it", "built")
    branch_set_state(branch=branch, session_state={"step": 2})
    file_write(branch=branch, path="plan.md", content="v2")
    file_delete(branch=branch, path="old.txt")
    file_write(branch=branch, path="new.py", content="print(1)")
    branch.refresh_from_db()
    return checkpoint


NOW = {"plan.md": "v2", "new.py": "print(1)"}
THEN = {"plan.md": "v1", "old.txt": "old"}


def heard_during(session_id, django_capture_on_commit_callbacks, action):
    heard: list[events.Event] = []
    stop = events.listen(session_id, heard.append)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            result = action()
    finally:
        stop()
    return result, heard


# --- all (the default) ---------------------------------------------------------------------


def test_the_default_scope_restores_the_conversation_and_the_files(branch, worked):
    result = checkpoint_restore(checkpoint=worked)
    assert result.scope == "all"
    assert contents(branch_history(result.branch)) == ["plan it", "planned"]
    assert files_of(result.branch) == THEN


# --- conversation only ---------------------------------------------------------------------


def test_conversation_only_as_a_branch_keeps_the_files_as_they_are_now(branch, worked):
    versions = FileVersion.objects.count()
    result = checkpoint_restore(checkpoint=worked, scope="conversation")
    new = result.branch
    assert new.pk != branch.pk
    assert new.is_current
    assert contents(branch_history(new)) == ["plan it", "planned"]
    assert new.session_state == {"step": 1}
    assert files_of(new) == NOW
    assert FileVersion.objects.count() == versions  # no file copied
    assert result.paths == []
    # The old branch keeps everything.
    assert contents(branch_history(branch)) == ["plan it", "planned", "build it", "built"]
    assert files_of(branch) == NOW


def test_conversation_only_as_a_branch_carries_the_shown_branchs_files(session, branch, worked):
    """The branch shown is another than the checkpoint's: its files are carried onto the new
    branch (a version of each path that differs, the user's, the contents shared)."""
    other = branch_fork(branch=branch, position=2)  # current now
    file_write(branch=other, path="other.txt", content="mine")
    blobs = set(FileVersion.objects.values_list("blob_id", flat=True))
    result = checkpoint_restore(checkpoint=worked, scope="conversation")
    assert result.branch.parent_id == branch.pk
    shown = files_of(other)
    assert files_of(result.branch) == shown
    assert result.paths == ["other.txt"]  # it forks at the checkpoint's files: THEN
    written = FileVersion.objects.filter(branch=result.branch)
    assert {v.metadata["by"] for v in written} == {"user"}
    assert set(FileVersion.objects.values_list("blob_id", flat=True)) - blobs <= {None}


def test_conversation_only_rewind_cuts_the_messages_but_keeps_every_file_version(branch, worked):
    later = checkpoint_create(branch=branch, name="later")
    versions = FileVersion.objects.count()
    assert rewind_preview(worked, scope="conversation")["files"] == 0
    result = checkpoint_restore(checkpoint=worked, mode="rewind", scope="conversation")
    assert result.branch.pk == branch.pk
    assert [d.id for d in result.deleted_checkpoints] == [later.pk]
    assert contents(branch_history(branch)) == ["plan it", "planned"]
    branch.refresh_from_db()
    assert branch.session_state == {"step": 1}
    assert files_of(branch) == NOW
    assert FileVersion.objects.count() == versions
    assert not Checkpoint.objects.filter(pk=later.pk).exists()
    # The kept versions now sit at the checkpoint's position: the next message finds them
    # written before it was sent (an edit's fork of it sees them; so does a later rewind).
    assert set(FileVersion.objects.filter(branch=branch).values_list("position", flat=True)) == {2}
    say(branch, "next")
    assert files_of(branch_fork(branch=branch, position=2, make_current=False)) == NOW
    assert fork_mark(branch, 2) >= max(FileVersion.objects.values_list("id", flat=True))


def test_conversation_only_rewind_carries_the_shown_branchs_files(session, branch, worked):
    """The branch shown forked after the checkpoint, so the rewind deletes it: its files are
    carried onto the rewound branch first."""
    restored = checkpoint_restore(checkpoint=checkpoint_create(branch=branch, name="end"))
    file_write(branch=restored.branch, path="shown.txt", content="shown")
    shown = files_of(restored.branch)
    result = checkpoint_restore(checkpoint=worked, mode="rewind", scope="conversation")
    assert not Branch.objects.filter(pk=restored.branch.pk).exists()
    assert files_of(result.branch) == shown
    assert result.paths == ["shown.txt"]


# --- files only ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["branch", "rewind"])
def test_files_only_restores_the_workspace_and_keeps_the_conversation(
    session, branch, worked, mode, django_capture_on_commit_callbacks
):
    later = checkpoint_create(branch=branch, name="later")
    messages = Message.objects.count()
    branches = Branch.objects.count()
    before = FileVersion.objects.count()
    result, heard = heard_during(
        session.pk,
        django_capture_on_commit_callbacks,
        lambda: checkpoint_restore(checkpoint=worked, mode=mode, scope="files"),
    )
    assert result.branch.pk == branch.pk
    assert result.branch.is_current
    assert result.deleted_checkpoints == []
    assert result.irreversible == []
    assert result.paths == ["new.py", "old.txt", "plan.md"]
    assert files_of(branch) == THEN
    assert contents(branch_history(branch)) == ["plan it", "planned", "build it", "built"]
    branch.refresh_from_db()
    assert branch.session_state == {"step": 2}
    assert Message.objects.count() == messages
    assert Branch.objects.count() == branches
    assert Checkpoint.objects.filter(pk=later.pk).exists()
    assert files_of(branch, mark=later.files_mark) == NOW  # nothing deleted
    # One new version per changed path (a deletion for new.py), the user's own write.
    written = FileVersion.objects.order_by("-id")[:3]
    assert FileVersion.objects.count() == before + 3
    assert {v.metadata["by"] for v in written} == {"user"}
    assert {v.metadata["restored_from"] for v in written} == {worked.pk}
    assert [e["paths"] for e in heard if e["type"] == "workspace.changed"] == [result.paths]
    assert not [e for e in heard if e["type"] in ("branch.changed", "checkpoint.deleted")]


def test_files_only_writes_on_the_branch_shown(session, branch, worked):
    other = branch_fork(branch=branch, position=4)
    result = checkpoint_restore(checkpoint=worked, scope="files")
    assert result.branch.pk == other.pk == current_branch(session).pk
    assert files_of(other) == THEN
    assert files_of(branch) == NOW


def test_files_only_with_nothing_changed_writes_nothing(branch, worked):
    checkpoint_restore(checkpoint=worked, scope="files")
    before = FileVersion.objects.count()
    assert checkpoint_restore(checkpoint=worked, scope="files").paths == []
    assert FileVersion.objects.count() == before


# --- bad input, cost -----------------------------------------------------------------------


def test_an_unknown_scope_is_refused_naming_the_scopes_and_changes_nothing(branch, worked):
    counts = (Branch.objects.count(), Message.objects.count(), FileVersion.objects.count())
    with pytest.raises(InvalidInput, match="'all', 'conversation' or 'files'"):
        checkpoint_restore(checkpoint=worked, scope="everything")
    assert counts == (Branch.objects.count(), Message.objects.count(), FileVersion.objects.count())


@pytest.mark.parametrize(
    ("mode", "scope"),
    [("branch", "conversation"), ("rewind", "conversation"), ("branch", "files")],
)
def test_each_scope_costs_the_same_queries_at_any_history_length(session, branch, mode, scope):
    """The history before the checkpoint grows; what comes after it (what a rewind cuts, and
    the files) stays."""

    def queries(n: int) -> int:
        b = branch_fork(branch=branch, position=0)
        grow(b, n)
        file_write(branch=b, path="a.txt", content="a")
        cp = checkpoint_create(branch=b, name=f"at-{n}")
        grow(b, 4)  # a rewind costs what it cuts: the same here
        file_write(branch=b, path="a.txt", content="b")
        file_write(branch=b, path="c.txt", content="c")
        with CaptureQueriesContext(connection) as ctx:
            checkpoint_restore(checkpoint=cp, mode=mode, scope=scope)
        branch_activate(branch=branch)
        return len(ctx.captured_queries)

    assert queries(10) == queries(400)
