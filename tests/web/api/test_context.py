"""GET /api/v1/branches/{id}/context/ and the turn's `usage` and `context`: what an integration
sees of the model's window (the fitting itself is tested in tests/agents/test_context.py)."""

from __future__ import annotations

import pytest

from agents.demo_model import SUMMARY_MARKER
from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.selectors import current_branch
from tests.conftest import grow
from tests.fakes.chat_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_new_branch_uses_a_little_of_the_window_and_has_no_summary(api, session, settings):
    settings.AGENT_CONTEXT_TOKENS = 10_000
    settings.AGENT_MAX_OUTPUT_TOKENS = 1_000
    branch = current_branch(session)
    body = api.get(f"/api/v1/branches/{branch.pk}/context/").json()
    assert body["branch"] == branch.pk
    assert (body["budget"], body["reserve"]) == (10_000, 1_000)
    assert 0 < body["used"] < 3_000  # the instructions and the tool schemas (SYSTEM_CHARS)
    assert body["percent"] == round(100 * body["used"] / 8_500)
    assert (body["view_start"], body["message_count"], body["summary"]) == (0, 0, None)

    grow(branch, 200, 350)
    fuller = api.get(f"/api/v1/branches/{branch.pk}/context/").json()
    assert fuller["used"] > body["used"] + 15_000
    assert fuller["percent"] > 100


def test_after_a_summary_the_api_shows_where_the_view_begins_and_the_summary(
    api, session, settings, fake_llm, inline_turns
):
    settings.AGENT_CONTEXT_TOKENS = 8_000
    settings.AGENT_MAX_OUTPUT_TOKENS = 1_000
    fake_llm.context_window = 8_000
    fake_llm.default = lambda body: Reply(
        "The talk so far, in short."
        if SUMMARY_MARKER in (body["messages"][0]["content"] or "")
        else "An answer."
    )
    grow(current_branch(session), 1000, 90)
    posted = api.post(
        f"/api/v1/sessions/{session.pk}/turns/", {"message": "hi", "wait": True}, format="json"
    )
    assert posted.status_code == 201, posted.content
    turn = posted.json()
    assert turn["status"] == "done"
    assert turn["finish_reason"] == "stop"
    assert turn["usage"]["input_tokens"] > 1_000
    assert turn["usage"]["output_tokens"] > 0
    context = turn["context"]
    assert context["budget"] == 8_000
    assert context["reserve"] == 1_000
    assert 0 < context["view_start"] < 1000
    assert context["summary"] is not None
    assert context["tokens"] <= 8_000 * 0.95 - 1_000

    branch = current_branch(session)
    body = api.get(f"/api/v1/branches/{branch.pk}/context/").json()
    assert body["view_start"] == context["view_start"]
    assert body["summary"]["id"] == context["summary"]
    assert body["summary"]["content"] == "The talk so far, in short."
    assert body["summary"]["end_position"] == context["view_start"]
    assert body["percent"] <= 100

    # A branch restored after the summary's end shares it.
    restored = checkpoint_restore(checkpoint=checkpoint_create(branch=branch), session=session)
    shared = api.get(f"/api/v1/branches/{restored.branch.pk}/context/").json()
    assert shared["summary"]["id"] == context["summary"]


def test_another_users_branch_context_is_not_found(bob_api, session):
    branch = current_branch(session)
    response = bob_api.get(f"/api/v1/branches/{branch.pk}/context/")
    assert response.status_code == 404
