"""File paths in NFC (workspace.nfc): `café.md` typed with one "é" (NFC) or with "e" and a
combining accent (NFD, as macOS names files) is one file through the API, the agent's tools and
an upload; an export holding NFD paths imports under NFC names; and the migration renames stored
NFD paths, visibly when an NFC twin exists, never merging two files."""

from __future__ import annotations

import importlib
import json
import unicodedata

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from checkpoints.transfer import session_export, session_import
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import session_create
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.web.api.conftest import bearer_client
from workspace.models import FileVersion, WorkspaceBlob
from workspace.nfc import nfc_renames
from workspace.selectors import workspace_file, workspace_files
from workspace.services import file_write
from workspace.validation import clean_path, sha256_of

NFC = unicodedata.normalize("NFC", "docs/café.md")
NFD = unicodedata.normalize("NFD", "docs/café.md")


def test_the_two_forms_differ_but_clean_to_the_same_path():
    assert NFC != NFD
    assert clean_path(NFD) == clean_path(NFC) == NFC


def test_renames_take_the_nfc_form_or_a_visible_name_beside_a_twin():
    twin = unicodedata.normalize("NFD", "café.md")
    alone = unicodedata.normalize("NFD", "notes/résumé")
    renames = nfc_renames([NFC, NFD, twin, alone, "plain.txt"])
    assert renames == {
        NFD: "docs/café (2).md",
        twin: "café.md",
        alone: "notes/résumé",
    }


@pytest.fixture
def api(alice):
    return bearer_client(alice)


def _url(session, path: str) -> str:
    return f"/api/v1/sessions/{session.pk}/files/{path}"


@pytest.mark.django_db
def test_the_api_writes_reads_and_deletes_one_file_whichever_form_it_is_given(api, session, branch):
    created = api.put(_url(session, NFD), b"first", content_type="text/plain")
    assert created.status_code == 201
    assert created.json()["path"] == NFC

    replaced = api.put(_url(session, NFC), b"second", content_type="text/plain")

    assert replaced.status_code == 200  # the same file, replaced
    listed = api.get(f"/api/v1/sessions/{session.pk}/files/").json()["results"]
    assert [f["path"] for f in listed] == [NFC]
    assert api.get(_url(session, NFD)).content == b"second"
    assert api.delete(_url(session, NFD)).status_code == 204
    assert workspace_files(branch) == []


@pytest.mark.django_db
def test_an_upload_named_in_nfd_replaces_the_nfc_file(client, alice, session, branch):
    file_write(branch=branch, path=NFC, content="old")
    client.force_login(alice)
    upload = SimpleUploadedFile(unicodedata.normalize("NFD", "café.md"), b"new")

    response = client.post(
        reverse("chat:files_upload", args=[session.pk]),
        {"folder": "docs", "files": [upload]},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    assert [f.path for f in workspace_files(branch)] == [NFC]
    assert workspace_file(branch, NFC)[1] == "new"


@pytest.mark.django_db(transaction=True)
def test_the_agents_tools_see_one_file_whichever_form_the_model_uses(fake_llm, session):
    fake_llm.queue(
        ToolCalls([ToolCall("write_file", {"path": NFD, "content": "v1"})]),
        ToolCalls([ToolCall("write_file", {"path": NFC, "content": "v2"})]),
        ToolCalls([ToolCall("read_file", {"path": NFD})]),
        ToolCalls([ToolCall("list_dir", {"path": unicodedata.normalize("NFD", "docs")})]),
        Reply("Done."),
    )

    turn = ask(session, "write café.md twice, then read it")

    assert turn.status == "done", turn.error
    results = [m.tool_result for m in branch_history(current_branch(session)) if m.role == "tool"]
    assert results == [
        f"✓ Created {NFC} (2 bytes).",
        f"✓ Updated {NFC} (2 bytes).",
        "v2",
        "Files in docs/:\ncafé.md (2 bytes)",
    ]
    assert [f.path for f in workspace_files(current_branch(session))] == [NFC]


@pytest.mark.django_db
def test_an_export_with_nfd_paths_imports_them_in_nfc_keeping_a_twin_apart(alice, session):
    branch = current_branch(session)
    file_write(branch=branch, path=NFC, content="composed")
    file_write(branch=branch, path="docs/other.md", content="decomposed")
    document = session_export(session=session)
    # As a server before this change could have stored it: a second file under the NFD name.
    versions = document["files"]["versions"]
    versions[1]["path"] = NFD

    imported = session_import(owner=alice, raw=json.dumps(document))

    files = {
        f.path: workspace_file(current_branch(imported), f.path)[1]
        for f in workspace_files(current_branch(imported))
    }
    assert files == {NFC: "composed", "docs/café (2).md": "decomposed"}


def _migrate_paths() -> None:
    migration = importlib.import_module("workspace.migrations.0002_paths_nfc")
    migration.forwards(apps, None)


def _raw_version(branch, path: str, content: str) -> None:
    """A version as the code before NFC stored it (its path as given)."""
    blob, _ = WorkspaceBlob.objects.get_or_create(
        session_id=branch.session_id,
        sha256=sha256_of(content),
        defaults={"content": content, "size": len(content.encode())},
    )
    FileVersion.objects.create(branch=branch, position=0, path=path, blob=blob)


@pytest.mark.django_db
def test_the_migration_renames_stored_nfd_paths(alice, session, branch):
    _raw_version(branch, NFD, "only the nfd one")
    twins = session_create(owner=alice, name="twins")
    twins_branch = current_branch(twins)
    _raw_version(twins_branch, NFC, "typed")
    _raw_version(twins_branch, NFD, "from a mac")
    _raw_version(twins_branch, NFD, "from a mac, again")

    _migrate_paths()

    assert workspace_file(branch, NFD)[1] == "only the nfd one"
    assert [f.path for f in workspace_files(branch)] == [NFC]
    shown = {f.path: workspace_file(twins_branch, f.path)[1] for f in workspace_files(twins_branch)}
    assert shown == {NFC: "typed", "docs/café (2).md": "from a mac, again"}
    assert FileVersion.objects.filter(path="docs/café (2).md").count() == 2
