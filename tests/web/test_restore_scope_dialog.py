"""The restore dialog's choice of what to restore (conversation and files, conversation only,
files only), its account per choice, and the restore it posts (Django test client)."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from checkpoints.services import checkpoint_create
from sessions_app.models import Branch, Message
from sessions_app.selectors import current_branch
from tests.conftest import say
from workspace.models import FileVersion
from workspace.selectors import workspace_file, workspace_files
from workspace.services import file_write

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def files_of(branch) -> dict[str, str]:
    return {f.path: workspace_file(branch, f.path)[1] for f in workspace_files(branch)}


@pytest.fixture
def worked(branch):
    say(branch, "a", "b")
    file_write(branch=branch, path="plan.md", content="v1")
    checkpoint = checkpoint_create(branch=branch, name="early")
    say(branch, "c", "d")
    file_write(branch=branch, path="plan.md", content="v2")
    return checkpoint


def url(checkpoint) -> str:
    return reverse("chat:checkpoint_restore", args=[checkpoint.pk])


def test_the_dialog_offers_what_to_restore_with_the_whole_as_the_default(as_alice, worked):
    page = as_alice.get(url(worked), **HX).text
    assert 'value="all" checked data-testid="restore-scope"' in page
    assert 'value="conversation" data-testid="restore-scope"' in page
    assert 'value="files" data-testid="restore-scope"' in page
    assert "Conversation and files" in page
    assert "Conversation only" in page
    assert "Files only" in page


def test_the_dialog_says_what_each_choice_brings_back(as_alice, worked):
    page = as_alice.get(url(worked), **HX).text
    assert "restores the earlier version of <code>plan.md</code>" in page
    conversation = page.split('data-testid="scope-note-conversation">')[1].split("</span>")[0]
    assert "first 2 messages" in conversation
    assert "the files stay as they are now" in conversation
    files = page.split('data-testid="scope-note-files">')[1].split("</span>")[0]
    assert "The files come back as listed below" in files
    assert "your own edit" in files
    assert "The messages stay as they are and nothing is deleted" in files


def test_files_only_from_the_dialog_keeps_the_conversation(as_alice, session, branch, worked):
    messages = Message.objects.count()
    response = as_alice.post(url(worked), {"mode": "branch", "scope": "files"}, **HX)
    assert response.status_code == 200
    assert current_branch(session).pk == branch.pk
    assert Message.objects.count() == messages
    assert files_of(branch) == {"plan.md": "v1"}


def test_conversation_only_from_the_dialog_keeps_the_files(as_alice, session, branch, worked):
    response = as_alice.post(url(worked), {"mode": "rewind", "scope": "conversation"}, **HX)
    assert response.status_code == 200
    branch.refresh_from_db()
    assert branch.message_count == 2
    assert files_of(branch) == {"plan.md": "v2"}


def test_an_unknown_scope_from_the_page_is_400_and_nothing_changes(as_alice, branch, worked):
    versions = FileVersion.objects.count()
    response = as_alice.post(url(worked), {"mode": "branch", "scope": "sideways"}, **HX)
    assert response.status_code == 400
    assert "use 'all', 'conversation' or 'files'" in html.unescape(response.text)
    assert Branch.objects.count() == 1
    assert FileVersion.objects.count() == versions


def test_bob_cannot_restore_alices_files(client, bob, branch, worked):
    client.force_login(bob)
    response = client.post(url(worked), {"scope": "files"}, **HX)
    assert response.status_code == 404
    assert files_of(branch) == {"plan.md": "v2"}
