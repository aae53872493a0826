"""Erasing a user, deleting a user, and deleting a session take their workspaces with them: no
file version and no content is left, and another user's files stay."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from checkpoints.services import checkpoint_create, checkpoint_restore
from ops.erasure import user_delete, user_holdings
from sessions_app.models import Branch, Session
from sessions_app.services import session_create, session_delete
from sessions_app.turns import turn_claim, turn_start
from workspace.models import FileVersion, WorkspaceBlob
from workspace.services import file_delete, file_write

pytestmark = pytest.mark.django_db(transaction=True)


def _filed(owner, name: str) -> Session:
    """A session with files on two branches, one of them written by a turn still running."""
    session = session_create(owner=owner, name=name)
    branch = Branch.objects.get(session=session, is_current=True)
    file_write(branch=branch, path="a.txt", content=f"{name} one")
    file_write(branch=branch, path="dir/b.txt", content=f"{name} two")
    file_write(branch=branch, path="pic.png", content=b"\x89PNG\r\n\x1a\n" + name.encode())
    cp = checkpoint_create(branch=branch, name="cp")
    file_delete(branch=branch, path="a.txt")
    side = checkpoint_restore(checkpoint=cp).branch
    turn = turn_claim(turn_id=turn_start(session=session, message="write").pk)
    file_write(branch=side, path="c.txt", content=f"{name} three", turn=turn, by="agent")
    return session


def _files_of(user) -> tuple[int, int]:
    return (
        FileVersion.objects.filter(branch__session__owner=user).count(),
        WorkspaceBlob.objects.filter(session__owner=user).count(),
    )


def test_an_erasure_leaves_no_file_version_or_content_of_the_user(alice, bob):
    _filed(alice, "alice's")
    _filed(alice, "alice's second")
    _filed(bob, "bob's")
    bob_before = _files_of(bob)
    assert user_holdings(alice)["file_versions"] == 10
    assert user_holdings(alice)["file_contents"] == 8
    user_id = alice.pk

    call_command("erase_user", "alice", "--noinput", stdout=StringIO())

    assert not FileVersion.objects.filter(branch__session__owner_id=user_id).exists()
    assert not WorkspaceBlob.objects.filter(session__owner_id=user_id).exists()
    assert not WorkspaceBlob.objects.filter(content__startswith="alice's").exists()
    assert not any(
        b"alice's" in bytes(d) for d in WorkspaceBlob.objects.values_list("data", flat=True) if d
    )
    assert WorkspaceBlob.objects.filter(session__owner=bob, data__isnull=False).count() == 1
    assert _files_of(bob) == bob_before


def test_deleting_a_user_deletes_their_files(alice, bob):
    _filed(alice, "alice's")
    _filed(bob, "bob's")

    user_delete(user=alice)

    assert (FileVersion.objects.count(), WorkspaceBlob.objects.count()) == (5, 4)
    assert not WorkspaceBlob.objects.filter(content__startswith="alice's").exists()


def test_deleting_a_session_deletes_its_files_and_only_its(alice):
    gone = _filed(alice, "gone")
    kept = _filed(alice, "kept")

    session_delete(session=gone)

    assert not FileVersion.objects.filter(branch__session_id=gone.pk).exists()
    assert not WorkspaceBlob.objects.filter(session_id=gone.pk).exists()
    assert FileVersion.objects.filter(branch__session=kept).count() == 5
    assert WorkspaceBlob.objects.filter(session=kept).count() == 4
