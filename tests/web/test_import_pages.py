"""The sidebar's import: another app's export of one conversation opens as a session; an export
of several answers with a progress box that polls until the job is done, then lists the sessions
it made. Another user's job is a 404."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from checkpoints.models import ImportJob
from sessions_app.models import Session
from tests.checkpoints.foreign_exports import chatgpt_conversation, chatgpt_export

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def upload(raw: bytes) -> dict:
    return {"document": SimpleUploadedFile("conversations.json", raw, "application/json")}


def test_the_sidebar_says_which_exports_it_takes_and_answers_in_place(as_alice):
    page = as_alice.get(reverse("chat:home")).content.decode()
    assert 'hx-post="/chat/import/"' in page
    assert 'hx-target="#import-result"' in page
    assert "ChatGPT (conversations.json), Open WebUI or LibreChat" in page


def test_one_chatgpt_conversation_opens_as_a_session_saying_what_was_left_out(as_alice):
    response = as_alice.post(
        reverse("chat:import"), upload(chatgpt_export(chatgpt_conversation())), follow=True
    )
    session = Session.objects.get()
    assert response.redirect_chain[-1][0] == reverse("chat:session", args=[session.pk])
    text = response.content.decode()
    assert "Imported “Trip to Lisbon”. Left out: 1 system message." in text
    assert session.branches.count() == 3
    # From the sidebar's form (htmx): the browser is sent to the new session.
    again = as_alice.post(
        reverse("chat:import"), upload(chatgpt_export(chatgpt_conversation("b"))), **HTMX
    )
    newest = Session.objects.get(session_name="b")
    assert again["HX-Redirect"] == reverse("chat:session", args=[newest.pk])


def test_several_conversations_answer_with_a_progress_box_that_polls_until_done(
    as_alice, client, bob
):
    raw = chatgpt_export(*(chatgpt_conversation(f"c{i}") for i in range(3)))
    # The job has not run yet: the box polls.
    response = as_alice.post(reverse("chat:import"), upload(raw), **HTMX)
    assert response.status_code == 200
    job = ImportJob.objects.get()
    box = response.content.decode()
    assert 'data-testid="import-job"' in box
    assert f'hx-get="/chat/imports/{job.pk}/"' in box
    assert 'hx-trigger="every 2s"' in box
    assert "Importing… 0 of 3 conversations" in box

    from checkpoints.foreign.services import import_job_run

    import_job_run(job_id=job.pk)
    done = as_alice.get(reverse("chat:import_job", args=[job.pk]), **HTMX).content.decode()
    assert "every 2s" not in done
    assert "Imported 3 of 3 conversations." in done
    for session in Session.objects.all():
        assert f'href="/chat/{session.pk}/"' in done
        assert session.session_name in done
    assert "Left out: 3 system messages" in done
    # Without htmx, the box is on a page of its own.
    page = as_alice.get(reverse("chat:import_job", args=[job.pk]))
    assert "<html" in page.content.decode()
    assert "Imported 3 of 3" in page.content.decode()
    # Bob: no such import.
    client.force_login(bob)
    assert client.get(reverse("chat:import_job", args=[job.pk])).status_code == 404


def test_without_htmx_several_conversations_run_and_land_on_the_progress_page(
    as_alice, inline_turns, django_capture_on_commit_callbacks
):
    raw = chatgpt_export(chatgpt_conversation("a"), chatgpt_conversation("b"))
    with django_capture_on_commit_callbacks(execute=True):
        response = as_alice.post(reverse("chat:import"), upload(raw))
    job = ImportJob.objects.get()
    assert response["Location"] == reverse("chat:import_job", args=[job.pk])
    page = as_alice.get(response["Location"]).content.decode()
    assert "Imported 2 of 2 conversations." in page
    assert Session.objects.count() == 2


def test_a_bad_export_says_why_in_place_and_creates_nothing(as_alice):
    response = as_alice.post(reverse("chat:import"), upload(b"[1, 2]"), **HTMX)
    assert response.status_code == 400
    assert "Import failed: Not a Rollback session export, nor a ChatGPT" in (
        response.content.decode()
    )
    assert not Session.objects.exists()
    assert not ImportJob.objects.exists()
