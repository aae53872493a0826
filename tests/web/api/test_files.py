"""The workspace through the REST API: list, read, write and delete a session's files, on the
current branch, another branch or as of a checkpoint; bad input is a clear 4xx that writes
nothing; another user's session, branch or checkpoint is a 404. And a restore's answer lists the
external effects it leaves behind."""

from __future__ import annotations

import pytest

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import Message
from sessions_app.selectors import current_branch
from sessions_app.services import message_append, session_create
from tests.conftest import external_call, say
from workspace.models import FileVersion
from workspace.services import file_write

pytestmark = pytest.mark.django_db


def _files(session) -> str:
    return f"/api/v1/sessions/{session.pk}/files/"


def _put(api, session, path: str, body: bytes | str, **extra):
    data = body.encode() if isinstance(body, str) else body
    return api.put(_files(session) + path, data, content_type="text/plain", **extra)


def test_put_creates_a_file_with_201_then_replaces_it_with_200(api, session, branch):
    created = _put(api, session, "notes/plan.md", "# Plan\n")
    assert created.status_code == 201
    body = created.json()
    assert body["path"] == "notes/plan.md"
    assert body["size"] == 7
    assert len(body["sha256"]) == 64
    assert body["updated_at"].endswith("Z") or "+00:00" in body["updated_at"]
    replaced = _put(api, session, "notes/plan.md", "# Plan v2\n")
    assert replaced.status_code == 200
    version = FileVersion.objects.filter(branch=branch).order_by("-id").first()
    assert version.metadata["by"] == "api"


def test_get_answers_the_content_as_utf8_text(api, session):
    _put(api, session, "hello.txt", "héllo wörld\n")
    response = api.get(_files(session) + "hello.txt")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode("utf-8") == "héllo wörld\n"


def test_get_with_an_accept_of_text_plain_still_answers(api, session):
    _put(api, session, "a.txt", "x")
    assert api.get(_files(session) + "a.txt", HTTP_ACCEPT="text/plain").status_code == 200
    missing = api.get(_files(session) + "b.txt", HTTP_ACCEPT="text/plain")
    assert missing.status_code == 404
    assert missing["Content-Type"].startswith("application/json")
    assert "b.txt" in missing.json()["detail"]


def test_the_list_is_paginated_and_sorted_by_path(api, session):
    for name in ("b.txt", "a/z.txt", "a/b.txt"):
        _put(api, session, name, name)
    body = api.get(_files(session)).json()
    assert body["count"] == 3
    assert [f["path"] for f in body["results"]] == ["a/b.txt", "a/z.txt", "b.txt"]
    assert set(body["results"][0]) == {"path", "size", "sha256", "updated_at", "binary"}
    assert body["results"][0]["binary"] is False
    page = api.get(_files(session), {"limit": 1, "offset": 1}).json()
    assert [f["path"] for f in page["results"]] == ["a/z.txt"]
    assert page["next"]
    assert page["previous"]


def test_delete_answers_204_and_the_file_is_gone(api, session):
    _put(api, session, "gone.txt", "bye")
    assert api.delete(_files(session) + "gone.txt").status_code == 204
    assert api.get(_files(session) + "gone.txt").status_code == 404
    assert api.get(_files(session)).json()["count"] == 0
    assert api.delete(_files(session) + "gone.txt").status_code == 404


def test_paths_may_hold_slashes_and_percent_encoded_characters(api, session):
    assert _put(api, session, "deep/er/a%20b%3Fc%23d.txt", "odd").status_code == 201
    paths = [f["path"] for f in api.get(_files(session)).json()["results"]]
    assert paths == ["deep/er/a b?c#d.txt"]
    assert api.get(_files(session) + "deep/er/a%20b%3Fc%23d.txt").content == b"odd"
    assert api.get(_files(session) + "deep/er/a%20b%3Fc%23d.txt?branch=").status_code == 200


def test_a_checkpoint_or_a_branch_shows_its_own_files(api, session, branch):
    _put(api, session, "a.txt", "one")
    checkpoint = checkpoint_create(branch=branch, name="cp")
    _put(api, session, "a.txt", "two")
    _put(api, session, "b.txt", "new")
    at_cp = api.get(_files(session), {"checkpoint": checkpoint.pk}).json()
    assert [f["path"] for f in at_cp["results"]] == ["a.txt"]
    assert api.get(_files(session) + f"a.txt?checkpoint={checkpoint.pk}").content == b"one"
    assert api.get(_files(session) + f"b.txt?checkpoint={checkpoint.pk}").status_code == 404
    restored = checkpoint_restore(checkpoint=checkpoint, mode="branch", session=session).branch
    # The current branch is now the restored one: writes and reads go there.
    assert api.get(_files(session) + "a.txt").content == b"one"
    assert api.get(_files(session) + f"a.txt?branch={branch.pk}").content == b"two"
    assert _put(api, session, "c.txt", "on the new branch").status_code == 201
    assert restored.pk == current_branch(session).pk
    old = api.get(_files(session), {"branch": branch.pk}).json()
    assert [f["path"] for f in old["results"]] == ["a.txt", "b.txt"]


@pytest.mark.parametrize(
    "path",
    ["../etc/passwd", "a/../../b", "%2E%2E/x", "a%00b", "x" * 121, "a\\b"],
)
def test_a_bad_path_is_400_and_writes_nothing(api, session, path):
    response = _put(api, session, path, "x")
    assert response.status_code == 400, response.content
    assert response.json()["detail"]
    assert not FileVersion.objects.exists()


def test_an_absolute_path_is_refused(api, session):
    response = _put(api, session, "/etc/passwd", "x")  # a double slash in the URL
    assert response.status_code in (400, 404)
    assert not FileVersion.objects.exists()


@pytest.mark.parametrize(
    ("name", "body", "kind"),
    [
        ("bin.dat", b"\xff\xfe\x00binary", "application/octet-stream"),
        ("dot.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image/png"),
        ("page.html", b"<script>alert(1)</script>", "text/plain; charset=utf-8"),
    ],
)
def test_any_body_is_kept_and_read_back_as_its_type_as_an_attachment(
    api, session, name, body, kind
):
    written = _put(api, session, name, body)
    assert written.status_code == 201
    assert written.json()["binary"] is not kind.startswith("text/plain")
    assert written.json()["size"] == len(body)
    [listed] = api.get(_files(session)).json()["results"]
    assert listed["binary"] is written.json()["binary"]
    response = api.get(_files(session) + name)
    assert response.status_code == 200
    assert response.content == body
    assert response["Content-Type"] == kind  # a text file is text/plain, whatever its name
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["X-Content-Type-Options"] == "nosniff"


def test_a_file_over_the_size_limit_is_413(api, session, settings):
    settings.WORKSPACE_MAX_FILE_BYTES = 10
    response = _put(api, session, "big.txt", "x" * 11)
    assert response.status_code == 413
    assert "WORKSPACE_MAX_FILE_BYTES" in response.json()["detail"]
    assert not FileVersion.objects.exists()


def test_a_file_past_the_file_limit_is_413_but_replacing_one_is_not(api, session, settings):
    settings.WORKSPACE_MAX_FILES = 2
    _put(api, session, "a.txt", "a")
    _put(api, session, "b.txt", "b")
    response = _put(api, session, "c.txt", "c")
    assert response.status_code == 413
    assert "WORKSPACE_MAX_FILES" in response.json()["detail"]
    assert _put(api, session, "a.txt", "again").status_code == 200
    # The refused write left nothing; the replacement took the place of the first version.
    assert sorted(FileVersion.objects.values_list("path", flat=True)) == ["a.txt", "b.txt"]
    assert api.get(_files(session) + "a.txt").content == b"again"


def test_a_file_where_a_folder_is_or_inside_a_file_is_409(api, session):
    _put(api, session, "docs/readme.md", "x")
    assert _put(api, session, "docs", "clash").status_code == 409
    assert _put(api, session, "docs/readme.md/more", "clash").status_code == 409
    assert FileVersion.objects.count() == 1


def test_a_checkpoint_and_a_branch_together_are_400(api, session, branch):
    checkpoint = checkpoint_create(branch=branch, name="cp")
    query = {"checkpoint": checkpoint.pk, "branch": branch.pk}
    assert api.get(_files(session), query).status_code == 400
    _put(api, session, "a.txt", "a")
    response = api.get(_files(session) + f"a.txt?checkpoint={checkpoint.pk}&branch={branch.pk}")
    assert response.status_code == 400


def test_a_branch_or_checkpoint_of_another_session_is_404(api, alice, session):
    other = session_create(owner=alice, name="other")
    other_branch = current_branch(other)
    other_cp = checkpoint_create(branch=other_branch, name="elsewhere")
    _put(api, session, "a.txt", "a")
    for query in ({"branch": other_branch.pk}, {"checkpoint": other_cp.pk}):
        assert api.get(_files(session), query).status_code == 404
        assert api.get(_files(session) + "a.txt", query).status_code == 404
    for query in ({"branch": "abc"}, {"checkpoint": "abc"}, {"checkpoint": 987654}):
        assert api.get(_files(session), query).status_code == 404


def test_bob_gets_404_on_alices_files_and_writes_nothing(api, bob, bob_api, session, branch):
    _put(api, session, "secret.txt", "alice's")
    checkpoint = checkpoint_create(branch=branch, name="cp")
    assert bob_api.get(_files(session)).status_code == 404
    assert bob_api.get(_files(session) + "secret.txt").status_code == 404
    assert (
        bob_api.put(_files(session) + "x.txt", b"x", content_type="text/plain").status_code == 404
    )
    assert bob_api.delete(_files(session) + "secret.txt").status_code == 404
    bobs = session_create(owner=bob, name="bob's")
    for query in ({"branch": branch.pk}, {"checkpoint": checkpoint.pk}):
        assert bob_api.get(_files(bobs), query).status_code == 404
    assert FileVersion.objects.count() == 1


def test_a_written_file_is_announced_to_the_session(
    api, session, branch, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        _put(api, session, "a.txt", "a")
    assert callbacks  # the workspace.changed event goes out once the write commits


def test_the_history_shows_each_tool_messages_effect(api, session, branch):
    say(branch, "hi", "hello")
    tool = message_append(branch=branch, role="tool", tool_name="post", tool_result="sent")
    Message.objects.filter(pk=tool.pk).update(effect="external")
    results = api.get(f"/api/v1/sessions/{session.pk}/messages/").json()["results"]
    assert [m["effect"] for m in results] == [None, None, "external"]


def test_a_restore_answers_the_external_effects_it_leaves_behind(api, session, branch):
    say(branch, "hi", "hello")
    checkpoint = checkpoint_create(branch=branch, name="before")
    kept = message_append(branch=branch, role="tool", tool_name="read", tool_result="ok")
    Message.objects.filter(pk=kept.pk).update(effect="none")
    sent = external_call(branch, "email", "sent")
    response = api.post(f"/api/v1/checkpoints/{checkpoint.pk}/restore/", {}, format="json")
    assert response.status_code == 200
    irreversible = response.json()["irreversible"]
    assert [m["id"] for m in irreversible] == [sent.pk]
    assert irreversible[0]["tool_name"] == "email"
    assert irreversible[0]["effect"] == "external"
    again = api.post(
        f"/api/v1/checkpoints/{checkpoint.pk}/restore/", {"mode": "rewind"}, format="json"
    )
    # The rewind cuts the checkpoint's own branch, where the e-mail was sent: listed again.
    assert [m["id"] for m in again.json()["irreversible"]] == [sent.pk]


def test_a_workspace_write_by_the_service_is_listed_too(api, session, branch):
    file_write(branch=branch, path="from/agent.py", content="print('hi')\n", by="agent")
    assert [f["path"] for f in api.get(_files(session)).json()["results"]] == ["from/agent.py"]


def test_a_rewind_deletes_and_lists_a_checkpoint_that_holds_later_file_edits(api, session):
    """Two checkpoints with only file edits between them (PUT, DELETE), a branch restored from
    the second, then a rewind to the first: the second and its branch hold edits the rewind
    deletes, so they go and are listed; neither shows the first's files."""
    _put(api, session, "plan.md", "v1")
    checkpoints = f"/api/v1/sessions/{session.pk}/checkpoints/"
    first = api.post(checkpoints, {"name": "first"}, format="json").json()["id"]
    _put(api, session, "plan.md", "v2")
    assert api.delete(_files(session) + "plan.md").status_code == 204
    _put(api, session, "new.md", "new")
    second = api.post(checkpoints, {"name": "second"}, format="json").json()["id"]
    restored = api.post(f"/api/v1/checkpoints/{second}/restore/", {}, format="json").json()

    response = api.post(f"/api/v1/checkpoints/{first}/restore/", {"mode": "rewind"}, format="json")

    assert response.status_code == 200
    assert response.json()["deleted_checkpoints"] == [second]
    assert api.get(f"/api/v1/checkpoints/{second}/").status_code == 404
    branches = api.get(f"/api/v1/sessions/{session.pk}/branches/").json()["results"]
    assert restored["branch"]["id"] not in [b["id"] for b in branches]
    assert api.get(_files(session) + "plan.md").content == b"v1"
    assert api.get(_files(session) + "new.md").status_code == 404
