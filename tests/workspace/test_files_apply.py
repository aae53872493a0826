"""Several writes and deletions as one step (files_apply: a sandboxed command's changes taken
back): all or none, the checks of a write at a time (folders, WORKSPACE_MAX_FILES, quotas),
the same coalescing (a second step of the same turn at the same position replaces the first
step's versions unless something needs them), one event, and statements per batch of rows,
not per file."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from checkpoints.services import checkpoint_create
from core import events
from core.errors import Conflict
from workspace.errors import TooManyFiles
from workspace.models import FileVersion, WorkspaceBlob
from workspace.quota import QuotaExceeded
from workspace.selectors import workspace_file, workspace_files
from workspace.services import file_write, files_apply

pytestmark = pytest.mark.django_db


def files_of(branch) -> dict[str, str]:
    return {f.path: workspace_file(branch, f.path)[1] for f in workspace_files(branch)}


def test_writes_and_deletions_land_together_with_one_event(
    branch, django_capture_on_commit_callbacks
):
    file_write(branch=branch, path="old.txt", content="old")
    heard: list[events.Event] = []
    stop = events.listen(branch.session_id, heard.append)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            changed = files_apply(
                branch=branch,
                writes={"a.txt": "a", "d/b.txt": "b", "same.txt": "a"},
                deletes=["old.txt", "never-was.txt"],
                by="agent",
            )
    finally:
        stop()
    assert changed == ["a.txt", "d/b.txt", "old.txt", "same.txt"]
    assert files_of(branch) == {"a.txt": "a", "d/b.txt": "b", "same.txt": "a"}
    assert [e["paths"] for e in heard if e["type"] == "workspace.changed"] == [changed]
    assert WorkspaceBlob.objects.filter(session_id=branch.session_id).count() == 2  # "a" once


def test_a_second_step_at_the_same_position_replaces_the_first_unless_a_checkpoint_holds_it(
    branch,
):
    files_apply(branch=branch, writes={"a.txt": "one"}, deletes=[])
    files_apply(branch=branch, writes={"a.txt": "two"}, deletes=[])
    assert FileVersion.objects.filter(branch=branch, path="a.txt").count() == 1
    checkpoint_create(branch=branch, name="holds two")
    files_apply(branch=branch, writes={"a.txt": "three"}, deletes=[])
    contents = [v.blob.content for v in FileVersion.objects.filter(branch=branch).order_by("id")]
    assert contents == ["two", "three"]
    assert not WorkspaceBlob.objects.filter(content="one").exists()


def test_a_refused_step_writes_nothing(branch, settings):
    file_write(branch=branch, path="docs/a.md", content="x")
    with pytest.raises(Conflict, match="is a folder"):
        files_apply(branch=branch, writes={"new.txt": "n", "docs": "clash"}, deletes=[])
    with pytest.raises(Conflict, match="is a file"):
        files_apply(branch=branch, writes={"docs/a.md/b": "under a file"}, deletes=[])
    settings.WORKSPACE_MAX_FILES = 3
    with pytest.raises(TooManyFiles, match="WORKSPACE_MAX_FILES"):
        files_apply(branch=branch, writes={f"f{i}": "" for i in range(3)}, deletes=[])
    settings.WORKSPACE_SESSION_MAX_BYTES = 10
    with pytest.raises(QuotaExceeded, match="WORKSPACE_SESSION_MAX_BYTES"):
        files_apply(branch=branch, writes={"big.txt": "y" * 20}, deletes=["docs/a.md"])
    assert files_of(branch) == {"docs/a.md": "x"}


def test_the_statements_grow_with_the_batches_not_with_the_files(branch):
    """Bulk inserts: a statement per batch of rows the database's parameter limit allows
    (about 140 versions on SQLite), never one per file."""

    def statements(n: int, tag: str) -> int:
        writes = {f"f{i:03d}.txt": f"{tag} {i}" for i in range(n)}
        with CaptureQueriesContext(connection) as queries:
            files_apply(branch=branch, writes=writes, deletes=[])
        return len(queries)

    assert statements(300, "b") <= statements(3, "a") + 20


def test_one_step_keeps_the_versions_a_checkpoint_needs_and_replaces_the_rest(branch):
    files_apply(branch=branch, writes={"a.txt": "a1", "b.txt": "b1"}, deletes=[])
    checkpoint_create(branch=branch, name="holds a1 and b1")
    files_apply(branch=branch, writes={"c.txt": "c1"}, deletes=[])
    files_apply(branch=branch, writes={"a.txt": "a2", "b.txt": "b2"}, deletes=["c.txt"])
    rows = FileVersion.objects.filter(branch=branch).order_by("path", "id")
    kept = [(v.path, v.blob.content if v.blob_id else None) for v in rows.select_related("blob")]
    assert kept == [
        ("a.txt", "a1"),
        ("a.txt", "a2"),
        ("b.txt", "b1"),
        ("b.txt", "b2"),
        ("c.txt", None),  # c1 went: nothing needed it
    ]
