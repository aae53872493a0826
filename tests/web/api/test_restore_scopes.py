"""POST /api/v1/checkpoints/{id}/restore/ with `scope`: all (default), conversation or files."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create
from sessions_app.models import Branch, Message
from tests.conftest import say
from workspace.models import FileVersion
from workspace.selectors import workspace_file, workspace_files
from workspace.services import file_write

pytestmark = pytest.mark.django_db


def files_of(branch) -> dict[str, str]:
    return {f.path: workspace_file(branch, f.path)[1] for f in workspace_files(branch)}


@pytest.fixture
def worked(branch):
    say(branch, "a", "b")
    file_write(branch=branch, path="plan.md", content="v1")
    checkpoint = checkpoint_create(branch=branch, name="early")
    say(branch, "c", "d")
    file_write(branch=branch, path="plan.md", content="v2")
    file_write(branch=branch, path="new.py", content="x")
    return checkpoint


def restore(api, checkpoint, body):
    return api.post(f"/api/v1/checkpoints/{checkpoint.pk}/restore/", body, format="json")


def test_conversation_scope_restores_the_messages_and_keeps_the_files(api, branch, worked):
    response = restore(api, worked, {"scope": "conversation"})
    assert response.status_code == 200
    body = response.json()
    assert body["branch"]["parent"] == branch.pk
    assert body["branch"]["message_count"] == 2
    assert body["deleted_checkpoints"] == []
    assert body["irreversible"] == []
    assert files_of(Branch.objects.get(pk=body["branch"]["id"])) == {
        "plan.md": "v2",
        "new.py": "x",
    }


def test_conversation_scope_as_a_rewind_keeps_the_files(api, branch, worked):
    later = checkpoint_create(branch=branch, name="later")
    body = restore(api, worked, {"mode": "rewind", "scope": "conversation"}).json()
    assert body["branch"]["id"] == branch.pk
    assert body["branch"]["message_count"] == 2
    assert body["deleted_checkpoints"] == [later.pk]
    assert files_of(branch) == {"plan.md": "v2", "new.py": "x"}


def test_files_scope_restores_the_files_and_keeps_the_conversation(api, branch, worked):
    messages = Message.objects.count()
    body = restore(api, worked, {"scope": "files"}).json()
    assert body["branch"]["id"] == branch.pk
    assert body["branch"]["message_count"] == 4
    assert body["deleted_checkpoints"] == []
    assert body["irreversible"] == []
    assert files_of(branch) == {"plan.md": "v1"}
    assert Message.objects.count() == messages
    assert FileVersion.objects.order_by("-id").first().metadata["by"] == "user"


def test_all_scope_is_the_default(api, branch, worked):
    body = restore(api, worked, {"mode": "branch", "scope": "all"}).json()
    assert files_of(Branch.objects.get(pk=body["branch"]["id"])) == {"plan.md": "v1"}


@pytest.mark.parametrize("scope", ["everything", "", 1, None, ["files"]])
def test_an_unknown_scope_is_400_naming_the_scopes_and_nothing_changes(api, branch, worked, scope):
    counts = (Branch.objects.count(), Message.objects.count(), FileVersion.objects.count())
    response = restore(api, worked, {"mode": "branch", "scope": scope})
    assert response.status_code == 400
    assert "use 'all', 'conversation' or 'files'" in response.json()["detail"]
    assert counts == (Branch.objects.count(), Message.objects.count(), FileVersion.objects.count())
    assert Checkpoint.objects.filter(pk=worked.pk).exists()


@pytest.mark.parametrize("scope", ["all", "conversation", "files"])
def test_bob_cannot_restore_alices_checkpoint_in_any_scope(bob_api, branch, worked, scope):
    before = files_of(branch)
    response = restore(bob_api, worked, {"scope": scope})
    assert response.status_code == 404
    assert files_of(branch) == before
    assert Branch.objects.count() == 1
