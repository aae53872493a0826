"""The restore dialog's rewind note, as the server renders it: a warning (in red) only when a
rewind deletes something, counting the file versions it deletes and those of them the user wrote
(uploads, edits); a quiet note when nothing comes after the checkpoint. The count costs the same
queries at any history length."""

from __future__ import annotations

import html
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from checkpoints.models import Checkpoint
from checkpoints.selectors import rewind_preview
from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.turns import turn_claim, turn_fail, turn_finish, turn_start
from tests.conftest import say
from workspace.models import FileVersion
from workspace.services import file_delete, file_write

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def note(client, checkpoint) -> tuple[str, str]:
    response = client.get(reverse("chat:checkpoint_restore", args=[checkpoint.pk]), **HX)
    assert response.status_code == 200
    found = re.search(
        r'<span class="([^"]+)" data-testid="rewind-warning">(.*?)</span>', response.text
    )
    assert found is not None
    return found.group(1), found.group(2)


def test_a_rewind_that_deletes_nothing_is_not_a_warning(as_alice, branch):
    say(branch, "one", "reply one")
    last = checkpoint_create(branch=branch, name="at the end")
    assert note(as_alice, last) == (
        "muted",
        "Nothing comes after this checkpoint on “main”: nothing is deleted.",
    )


def test_a_rewind_that_deletes_messages_is_a_warning(as_alice, branch):
    say(branch, "one", "reply one")
    early = checkpoint_create(branch=branch, name="early")
    say(branch, "two", "reply two")
    kind, text = note(as_alice, early)
    assert kind == "warning"
    assert "permanently deletes 2 later messages" in text


def test_a_rewind_that_deletes_only_file_edits_and_a_checkpoint_is_a_warning(as_alice, branch):
    """Edits in the Files panel after a checkpoint, then another checkpoint at the same message:
    a rewind to the first deletes the edits and the second checkpoint (which holds them), and
    the branch restored from it, and the dialog says so."""
    say(branch, "one", "reply one")
    file_write(branch=branch, path="plan.md", content="v1")
    file_write(branch=branch, path="old.md", content="old")
    first = checkpoint_create(branch=branch, name="first")
    file_write(branch=branch, path="plan.md", content="v2")
    file_delete(branch=branch, path="old.md")
    second = checkpoint_create(branch=branch, name="second")
    checkpoint_restore(checkpoint=second)

    kind, text = note(as_alice, first)

    assert kind == "warning"
    assert html.unescape(text) == (
        "Cuts the branch “main” back to this checkpoint: permanently deletes 0 later messages, "
        "1 later checkpoint, 2 file versions written after it (all your own uploads or edits) "
        "and 1 branch forked from them."
    )


def _upload(client, session, name: str, text: str) -> None:
    upload = SimpleUploadedFile(name, text.encode(), content_type="text/plain")
    response = client.post(
        reverse("chat:files_upload", args=[session.pk]), {"folder": "", "files": [upload]}, **HX
    )
    assert response.status_code == 200
    assert "upload-done" in response.text


def test_a_rewind_that_deletes_only_the_users_upload_says_so(as_alice, session, branch):
    """Issue 36: the dialog said "nothing is deleted" while the rewind deleted the user's own
    uploads made after the checkpoint."""
    say(branch, "one", "reply one")
    last = checkpoint_create(branch=branch, name="at the end")
    _upload(as_alice, session, "notes.md", "mine")

    kind, text = note(as_alice, last)

    assert kind == "warning"
    assert html.unescape(text) == (
        "Cuts the branch “main” back to this checkpoint: permanently deletes 0 later messages, "
        "0 later checkpoints, 1 file version written after it (your own upload or edit)."
    )
    checkpoint_restore(checkpoint=last, mode="rewind")
    assert not FileVersion.objects.filter(branch=branch).exists()  # it did delete it


def test_the_count_tells_the_users_versions_from_the_agents(as_alice, session, branch):
    say(branch, "one", "reply one")
    start = checkpoint_create(branch=branch, name="start")
    turn = turn_claim(turn_id=turn_start(session=session, message="write").pk)
    file_write(branch=branch, path="by-agent.md", content="a", turn=turn, by="agent")
    file_write(branch=branch, path="by-agent-2.md", content="b", turn=turn, by="agent")
    turn_fail(turn=turn, error="stopped here")  # a failed turn's writes go: none left
    turn = turn_claim(turn_id=turn_start(session=session, message="write again").pk)
    file_write(branch=branch, path="kept.md", content="c", turn=turn, by="agent")
    turn_finish(turn=turn, reply="done", tools_used=["write_file"])
    _upload(as_alice, session, "mine.md", "d")
    file_write(branch=branch, path="mine.md", content="edited", by="user")
    side = checkpoint_restore(checkpoint=checkpoint_create(branch=branch, name="later")).branch
    file_write(branch=side, path="side.md", content="e", by="user")  # on a branch that goes

    kind, text = note(as_alice, start)

    assert kind == "warning"
    # The upload and its edit at the same point are one version (workspace.coalescing).
    assert "3 file versions written after it (2 of them your own uploads or edits)" in (
        html.unescape(text)
    )
    assert rewind_preview(start)["files"] == 3
    before = FileVersion.objects.count()
    checkpoint_restore(checkpoint=start, mode="rewind")
    assert before - FileVersion.objects.count() == 3


def test_the_count_costs_the_same_queries_at_any_history_length(session, branch):
    say(branch, "one", "reply one")
    start = checkpoint_create(branch=branch, name="start")

    def grow(n: int) -> None:
        for i in range(n):
            say(branch, f"q{i}", f"a{i}")
            file_write(branch=branch, path=f"f{i % 3}.md", content=f"v{i}", by="user")
            checkpoint_restore(checkpoint=checkpoint_create(branch=branch, name=f"cp{i}"))
            branch.refresh_from_db()

    def fresh():
        return Checkpoint.objects.select_related("branch").get(pk=start.pk)

    grow(2)
    with CaptureQueriesContext(connection) as few:
        small = rewind_preview(fresh())
    grow(20)
    with CaptureQueriesContext(connection) as many:
        large = rewind_preview(fresh())
    assert (small["files"], large["files"]) == (2, 22)
    assert large["branches"] == 22
    assert len(many) == len(few)
