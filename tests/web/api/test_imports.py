"""POST /api/v1/sessions/import/ with other apps' exports: one conversation is a session (201),
several are a job (202) whose progress GET /api/v1/imports/{id}/ gives, to its owner only."""

from __future__ import annotations

import json

import pytest

from sessions_app.models import Branch, Session
from tests.checkpoints.foreign_exports import (
    chatgpt_conversation,
    chatgpt_export,
    librechat_export,
    openwebui_chat,
)

pytestmark = pytest.mark.django_db


def post(api, raw):
    return api.generic("POST", "/api/v1/sessions/import/", raw, content_type="application/json")


def test_one_chatgpt_conversation_is_201_a_session_with_its_branches_and_what_was_left_out(api):
    response = post(api, chatgpt_export(chatgpt_conversation()))
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["name"], body["branch_count"]) == ("Trip to Lisbon", 3)
    assert body["skipped"] == {"system": 1}
    branches = api.get(f"/api/v1/sessions/{body['id']}/branches/").json()["results"]
    assert [(b["message_count"], b["is_current"]) for b in branches] == [
        (4, True),
        (4, False),
        (4, False),
    ]
    history = api.get(f"/api/v1/sessions/{body['id']}/messages/").json()["results"]
    assert [m["content"] for m in history] == ["Q1", "A1", "Q2", "A2-regenerated"]


@pytest.mark.parametrize(
    "document",
    [openwebui_chat(), librechat_export(), librechat_export(recursive=True)],
    ids=["open webui", "librechat", "librechat recursive"],
)
def test_one_open_webui_or_librechat_conversation_is_201(api, document):
    response = post(api, json.dumps(document))
    assert response.status_code == 201, response.content
    assert response.json()["branch_count"] == 3


def test_several_conversations_are_202_a_job_whose_progress_lists_the_sessions_made(
    api, bob_api, inline_turns, django_capture_on_commit_callbacks
):
    broken = openwebui_chat("broken")
    broken["chat"]["history"]["messages"]["a3"]["parentId"] = "nowhere"
    raw = json.dumps([openwebui_chat("first"), broken, openwebui_chat("second")])
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api, raw)
    assert response.status_code == 202, response.content
    job = response.json()
    assert (job["status"], job["total"], job["source"]) == ("queued", 3, "openwebui")
    assert response["Location"] == f"/api/v1/imports/{job['id']}/"

    progress = api.get(f"/api/v1/imports/{job['id']}/")
    assert progress.status_code == 200
    done = progress.json()
    assert (done["status"], done["done"], done["total"]) == ("done", 3, 3)
    assert [s["name"] for s in done["sessions"]] == ["first", "second"]
    assert [(f["index"], f["title"]) for f in done["failures"]] == [(1, "broken")]
    assert done["skipped"] == {"attachment": 2, "image": 2}
    assert done["skipped_summary"] == ["2 attachments", "2 images"]
    assert done["finished_at"] is not None
    for s in done["sessions"]:
        assert Branch.objects.filter(session=s["id"]).count() == 3

    # Bob is told there is no such import.
    refused = bob_api.get(f"/api/v1/imports/{job['id']}/")
    assert refused.status_code == 404
    assert "first" not in refused.content.decode()


@pytest.mark.parametrize(
    ("raw", "status", "says"),
    [
        ("[1]", 400, "nor a ChatGPT"),
        ("[]", 400, "no conversation"),
        (
            json.dumps([{"title": "x", "mapping": {"a": {"parent": "a", "message": None}}}]),
            400,
            "form a cycle",
        ),
    ],
    ids=["unknown shape", "no conversation", "a cycle"],
)
def test_bad_exports_are_400_and_nothing_is_written(api, raw, status, says):
    response = post(api, raw)
    assert response.status_code == status
    assert says in response.json()["detail"]
    assert not Session.objects.exists()


def test_too_many_conversations_or_messages_are_413(api, settings):
    settings.ROLLBACK_IMPORT_MAX_CONVERSATIONS = 1
    response = post(api, chatgpt_export(chatgpt_conversation("a"), chatgpt_conversation("b")))
    assert response.status_code == 413
    assert "the limit is 1 per file" in response.json()["detail"]
    settings.ROLLBACK_IMPORT_MAX_MESSAGES = 3
    response = post(api, chatgpt_export(chatgpt_conversation()))
    assert response.status_code == 413
    assert not Session.objects.exists()
