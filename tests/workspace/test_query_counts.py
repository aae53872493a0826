"""A checkpoint and a restore cost the same whatever the workspace holds: the same statements with
1 file and with 500 (nothing is copied; a mark is one index lookup), and a listing is one
statement whatever the lineage's depth."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from checkpoints.models import Checkpoint
from checkpoints.selectors import checkpoint_files
from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import Branch
from sessions_app.services import session_create
from tests.conftest import say
from workspace.models import FileVersion, WorkspaceBlob
from workspace.selectors import workspace_files
from workspace.services import file_write
from workspace.validation import sha256_of

pytestmark = pytest.mark.django_db


def _fill(branch: Branch, n: int) -> None:
    """n files in the branch's workspace, as n writes would leave them (in bulk, for speed)."""
    branch.refresh_from_db()
    blobs = WorkspaceBlob.objects.bulk_create(
        [
            WorkspaceBlob(
                session_id=branch.session_id,
                sha256=sha256_of(f"file {i}"),
                content=f"file {i}",
                size=6,
            )
            for i in range(n)
        ]
    )
    FileVersion.objects.bulk_create(
        [
            FileVersion(
                branch=branch, position=branch.message_count, path=f"src/f{i:04}.py", blob=b
            )
            for i, b in enumerate(blobs)
        ]
    )


def _workspace_of(owner, n: int) -> Branch:
    session = session_create(owner=owner, name=f"{n} files")
    branch = Branch.objects.get(session=session, is_current=True)
    say(branch, "write files", "written")
    _fill(branch, n)
    return branch


def _statements(action) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        action()
    return [q["sql"] for q in queries.captured_queries]


def _checkpoint_cost(branch: Branch) -> list[str]:
    return _statements(lambda: checkpoint_create(branch=branch, name="cp"))


def _restore_cost(branch: Branch, mode: str) -> list[str]:
    checkpoint = checkpoint_create(branch=branch, name=f"before {mode}")
    say(branch, "one more change", "changed")
    file_write(branch=branch, path="src/f0000.py", content="changed after the checkpoint")
    return _statements(lambda: checkpoint_restore(checkpoint=checkpoint, mode=mode))


# The workspaces compared (docs/architecture.md quotes them).
FEW_FILES, MANY_FILES = 1, 500


def test_a_checkpoint_costs_the_same_with_1_and_500_files(alice):
    small, large = _workspace_of(alice, FEW_FILES), _workspace_of(alice, MANY_FILES)
    assert len(_checkpoint_cost(small)) == len(_checkpoint_cost(large))


@pytest.mark.parametrize("mode", ["branch", "rewind"])
def test_a_restore_costs_the_same_with_1_and_500_files(alice, mode):
    small, large = _workspace_of(alice, FEW_FILES), _workspace_of(alice, MANY_FILES)

    one, many = _restore_cost(small, mode), _restore_cost(large, mode)

    assert len(one) == len(many), (one, many)
    restored = Branch.objects.get(session_id=large.session_id, is_current=True)
    assert len(workspace_files(restored)) == MANY_FILES


def test_a_listing_is_one_statement_whatever_the_lineage(alice):
    branch = _workspace_of(alice, 50)
    for depth in range(5):
        checkpoint = checkpoint_create(branch=branch, name=f"level {depth}")
        branch = checkpoint_restore(checkpoint=checkpoint).branch
        file_write(branch=branch, path=f"level{depth}.txt", content=str(depth))
    checkpoint = Checkpoint.objects.select_related("branch").get(pk=checkpoint.pk)

    with CaptureQueriesContext(connection) as queries:
        found = workspace_files(branch)
        under = workspace_files(branch, path="src")
        at_checkpoint = checkpoint_files(checkpoint)

    assert len(queries.captured_queries) == 3
    assert len(found) == 55
    assert len(under) == 50
    assert len(at_checkpoint) == 54
