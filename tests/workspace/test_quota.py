"""The workspace's storage quotas (workspace.quota), per session and per user, on file versions and
on the bytes of distinct contents: a write over one is refused the same way through the API
(413), the Files panel's upload and the agent's tool (a "✗" result through a real turn), and
nothing is lost: the file keeps its content and no version is added. A deletion is never refused,
a content the session holds already adds no bytes, a rewind frees space, an import counts, and
the dashboard and the Files panel show the usage beside the quotas."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from checkpoints.services import checkpoint_create, checkpoint_restore
from checkpoints.transfer import session_export, session_import
from sessions_app.errors import ImportTooLarge
from sessions_app.models import Session
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import session_create
from tests.conftest import ask, say
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.web.api.conftest import bearer_client
from workspace.models import FileVersion
from workspace.quota import QuotaExceeded, session_storage, user_storage
from workspace.selectors import workspace_file, workspace_files
from workspace.services import file_delete, file_write

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def api(alice):
    return bearer_client(alice)


@pytest.fixture
def no_quotas(settings):
    """Every quota off; each test sets the one it is about."""
    settings.WORKSPACE_SESSION_MAX_VERSIONS = 0
    settings.WORKSPACE_SESSION_MAX_BYTES = 0
    settings.WORKSPACE_USER_MAX_VERSIONS = 0
    settings.WORKSPACE_USER_MAX_BYTES = 0
    return settings


def _files_url(session, path: str = "") -> str:
    return f"/api/v1/sessions/{session.pk}/files/{path}"


def _put(api, session, path: str, body: str):
    return api.put(_files_url(session, path), body.encode(), content_type="text/plain")


def _content(branch, path: str) -> str:
    return workspace_file(branch, path)[1]


# --- the API ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_write_past_the_sessions_version_quota_is_413_and_the_file_is_untouched(
    api, session, branch, no_quotas
):
    no_quotas.WORKSPACE_SESSION_MAX_VERSIONS = 3
    for text in ("one", "two", "three"):
        assert _put(api, session, "notes.md", text).status_code in (200, 201)
        # A checkpoint holds each version, so the next write cannot replace it (coalescing).
        checkpoint_create(branch=branch, name=text)

    refused = _put(api, session, "notes.md", "four")

    assert refused.status_code == 413
    detail = refused.json()["detail"]
    assert "WORKSPACE_SESSION_MAX_VERSIONS" in detail
    assert "3 file versions" in detail
    assert "rewind" in detail  # how to free space
    assert _content(branch, "notes.md") == "three"
    assert FileVersion.objects.filter(branch=branch).count() == 3
    # A deletion is never refused: it stores no content.
    assert api.delete(_files_url(session, "notes.md")).status_code == 204


@pytest.mark.django_db
def test_a_rewrite_that_replaces_its_version_passes_a_full_version_quota(
    api, session, branch, no_quotas
):
    no_quotas.WORKSPACE_SESSION_MAX_VERSIONS = 1
    assert _put(api, session, "notes.md", "one").status_code == 201
    # Before the next message, nothing holds the first version: the rewrite replaces it.
    assert _put(api, session, "notes.md", "two").status_code == 200
    assert _content(branch, "notes.md") == "two"
    assert FileVersion.objects.filter(branch=branch).count() == 1
    assert _put(api, session, "other.md", "x").status_code == 413


@pytest.mark.django_db
def test_the_byte_quota_counts_each_distinct_content_once(api, session, branch, no_quotas):
    no_quotas.WORKSPACE_SESSION_MAX_BYTES = 10
    assert _put(api, session, "a.txt", "12345").status_code == 201
    assert _put(api, session, "b.txt", "abcde").status_code == 201
    # The session already holds this content: a new version, no new bytes.
    assert _put(api, session, "copy.txt", "12345").status_code == 201
    assert session_storage(session.pk).bytes == 10

    refused = _put(api, session, "a.txt", "changed")

    assert refused.status_code == 413
    assert "WORKSPACE_SESSION_MAX_BYTES" in refused.json()["detail"]
    assert _content(branch, "a.txt") == "12345"
    assert session_storage(session.pk).bytes == 10


@pytest.mark.django_db
def test_the_users_quota_adds_up_all_their_sessions(api, alice, session, no_quotas):
    no_quotas.WORKSPACE_USER_MAX_BYTES = 12
    other = session_create(owner=alice, name="second")
    assert _put(api, session, "a.txt", "12345678").status_code == 201

    refused = _put(api, other, "b.txt", "12345")  # 8 + 5 > 12, though this session holds 0

    assert refused.status_code == 413
    detail = refused.json()["detail"]
    assert "WORKSPACE_USER_MAX_BYTES" in detail
    assert "your sessions" in detail
    assert "delete sessions you no longer need" in detail
    assert workspace_files(current_branch(other)) == []
    assert user_storage(alice.pk).bytes == 8
    # Up to the quota itself is allowed.
    assert _put(api, other, "b.txt", "1234").status_code == 201


@pytest.mark.django_db
def test_a_rewind_frees_the_versions_it_deletes(session, branch, no_quotas):
    no_quotas.WORKSPACE_SESSION_MAX_VERSIONS = 2
    file_write(branch=branch, path="notes.md", content="v1")
    checkpoint = checkpoint_create(branch=branch, name="before")
    say(branch, "go on", "ok")
    file_write(branch=branch, path="notes.md", content="v2")
    say(branch, "and again", "ok")  # past v2's position: v3 could not replace it
    with pytest.raises(QuotaExceeded):
        file_write(branch=branch, path="notes.md", content="v3")

    checkpoint_restore(checkpoint=checkpoint, session=session, mode="rewind")
    rewound = current_branch(session)
    file_write(branch=rewound, path="notes.md", content="v3")

    assert _content(rewound, "notes.md") == "v3"


# --- the Files panel ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_upload_over_the_quota_shows_why_in_the_form_and_writes_nothing(
    client, alice, session, branch, no_quotas
):
    no_quotas.WORKSPACE_SESSION_MAX_VERSIONS = 2
    file_write(branch=branch, path="docs/kept.txt", content="kept")
    say(branch, "next", "ok")  # the upload's kept.txt cannot replace its version
    client.force_login(alice)
    uploads = [SimpleUploadedFile("a.txt", b"alpha"), SimpleUploadedFile("kept.txt", b"new")]

    response = client.post(
        reverse("chat:files_upload", args=[session.pk]),
        {"folder": "docs", "files": uploads},
        **HX,
    )

    assert response.status_code == 413
    html = response.content.decode().replace("&#x27;", "'")
    assert 'data-testid="upload-error"' in html
    assert "Over the workspace quota" in html
    assert "WORKSPACE_SESSION_MAX_VERSIONS" not in html  # a setting's name is the operator's
    assert 'value="docs"' in html  # the form keeps what the reader typed
    assert [f.path for f in workspace_files(branch)] == ["docs/kept.txt"]
    assert _content(branch, "docs/kept.txt") == "kept"
    assert FileVersion.objects.filter(branch=branch).count() == 1


@pytest.mark.django_db
def test_the_files_panel_shows_the_storage_beside_the_quotas(
    client, alice, session, branch, no_quotas
):
    no_quotas.WORKSPACE_SESSION_MAX_VERSIONS = 50
    no_quotas.WORKSPACE_USER_MAX_BYTES = 2048
    file_write(branch=branch, path="a.txt", content="x" * 1024)
    say(branch, "next", "ok")  # two versions: the second cannot replace the first
    file_write(branch=branch, path="a.txt", content="y" * 1024)
    client.force_login(alice)

    for name in ("chat:files_panel", "chat:files_tree"):
        html = client.get(reverse(name, args=[session.pk]), **HX).content.decode()
        usage = html[html.index('id="files-usage"') :]
        usage = usage[: usage.index("</p>")]
        assert "this session keeps 2.0\xa0KB in 2 of 50 file versions" in usage
        assert "all your sessions 2.0\xa0KB of 2.0\xa0KB in 2 versions." in usage


# --- the agent's tools, through a turn ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_agents_write_over_the_quota_is_an_error_result_and_the_file_stays(
    fake_llm, session, branch, no_quotas
):
    no_quotas.WORKSPACE_SESSION_MAX_VERSIONS = 1
    file_write(branch=branch, path="notes.md", content="the user's notes")
    fake_llm.queue(
        ToolCalls([ToolCall("write_file", {"path": "notes.md", "content": "overwritten"})]),
        Reply("The workspace is full."),
    )

    turn = ask(session, "rewrite notes.md")

    assert turn.status == "done", turn.error
    tool = [m for m in branch_history(current_branch(session)) if m.role == "tool"][-1]
    assert tool.tool_result.startswith("✗ Over the workspace quota")
    assert "WORKSPACE_SESSION_MAX_VERSIONS" in tool.tool_result
    # The model was given the refusal as the call's result.
    assert fake_llm.messages(-1)[-1]["content"] == tool.tool_result
    assert _content(current_branch(session), "notes.md") == "the user's notes"
    assert FileVersion.objects.count() == 1


# --- imports --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_import_over_the_users_quota_is_refused_and_makes_no_session(
    alice, session, branch, no_quotas
):
    file_write(branch=branch, path="a.txt", content="alpha")
    say(branch, "next", "ok")  # two versions: the second cannot replace the first
    file_write(branch=branch, path="a.txt", content="beta")
    document = json.dumps(session_export(session=session))
    no_quotas.WORKSPACE_USER_MAX_VERSIONS = 3  # alice keeps 2; the copy would add 2

    with pytest.raises(ImportTooLarge) as refused:
        session_import(owner=alice, raw=document)

    assert "Cannot import this document" in refused.value.message
    assert "WORKSPACE_USER_MAX_VERSIONS" in refused.value.message
    assert Session.objects.filter(owner=alice).count() == 1
    no_quotas.WORKSPACE_USER_MAX_VERSIONS = 4
    copy = session_import(owner=alice, raw=document)
    assert _content(current_branch(copy), "a.txt") == "beta"


@pytest.mark.django_db
def test_an_import_over_the_quota_is_413_through_the_api(api, session, branch, no_quotas):
    file_write(branch=branch, path="a.txt", content="alpha")
    document = session_export(session=session)
    no_quotas.WORKSPACE_SESSION_MAX_BYTES = 4

    response = api.post("/api/v1/sessions/import/", document, format="json")

    assert response.status_code == 413
    assert "WORKSPACE_SESSION_MAX_BYTES" in response.json()["detail"]


# --- the dashboard ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_dashboard_shows_each_users_files_beside_the_quota(
    client, admin_user, alice, session, branch, no_quotas
):
    no_quotas.WORKSPACE_USER_MAX_VERSIONS = 100
    file_write(branch=branch, path="a.txt", content="x" * 3000)
    file_write(branch=branch, path="b.txt", content="x" * 3000)  # the same content: stored once
    say(branch, "next", "ok")  # the later versions cannot replace the earlier ones
    file_write(branch=branch, path="a.txt", content="y" * 1000)
    file_delete(branch=branch, path="b.txt")
    client.force_login(admin_user)

    html = client.get("/admin/dashboard/").content.decode()

    row = html[html.index('href="/admin/accounts/user/' + str(alice.pk)) :]
    cell = row[row.index('data-testid="user-files"') :]
    cell = cell[: cell.index("</td>")]
    assert "4000 bytes of file contents, 4 file versions" in cell
    assert "3.9\xa0KB, 4 of 100 versions" in cell
    assert "per-user workspace quota (no byte limit, 100 versions)" in " ".join(html.split())
    # Its storage counts the files too.
    storage = row[row.index("bytes: messages") :]
    assert "files 4000" in storage[: storage.index('"')]


@pytest.mark.django_db
def test_the_sessions_the_dashboard_links_show_each_ones_workspace(
    client, admin_user, alice, session, branch, no_quotas
):
    no_quotas.WORKSPACE_SESSION_MAX_BYTES = 1024 * 1024
    file_write(branch=branch, path="a.txt", content="x" * 2048)
    say(branch, "next", "ok")  # two versions: the second cannot replace the first
    file_write(branch=branch, path="a.txt", content="y" * 2048)
    empty = session_create(owner=alice, name="empty")
    client.force_login(admin_user)
    dashboard = client.get("/admin/dashboard/").content.decode()
    sessions_url = f"/admin/sessions_app/session/?owner={alice.pk}"
    assert sessions_url in dashboard

    html = client.get(sessions_url).content.decode()

    rows = {
        pk: html[html.index(f"/admin/sessions_app/session/{pk}/change/") :]
        for pk in (session.pk, empty.pk)
    }
    cells = {pk: row[row.index('class="field-workspace_storage"') :] for pk, row in rows.items()}
    cells = {pk: cell[: cell.index("</td>")] for pk, cell in cells.items()}
    assert "4.0\xa0KB of 1.0\xa0MB, 2 versions" in cells[session.pk]
    assert "0\xa0bytes of 1.0\xa0MB, 0 versions" in cells[empty.pk]
