"""A session's instructions and model through the API: PATCH metadata.settings, create, import;
bad input is a 400 with a clear `detail` and nothing written; another user's session a 404.
Runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest

from core.model_choice import INSTRUCTIONS_MAX_CHARS
from sessions_app.models import Session

pytestmark = pytest.mark.django_db


@pytest.fixture
def made(api):
    return api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()


def test_patch_stores_the_sessions_instructions_and_model(api, made, settings):
    settings.AGENT_ALLOWED_MODELS = ["big-model"]
    chosen = {"settings": {"instructions": "Answer in haiku.", "model": "big-model"}}
    response = api.patch(f"/api/v1/sessions/{made['id']}/", {"metadata": chosen}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["metadata"] == chosen
    longest = {"settings": {"instructions": "x" * INSTRUCTIONS_MAX_CHARS}}
    response = api.patch(f"/api/v1/sessions/{made['id']}/", {"metadata": longest}, format="json")
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("chosen", "detail"),
    [
        ({"instructions": "x" * (INSTRUCTIONS_MAX_CHARS + 1)}, "the limit is 8,000"),
        ({"instructions": ["be", "brief"]}, "instructions (settings.instructions) must be text"),
        ({"instructions": 42}, "must be text"),
        ({"instructions": "a\x00b"}, "NUL"),
        ({"model": "no-such-model"}, "'no-such-model' is not allowed"),
        ({"checkpoint_each_message": "yes"}, "checkpoint_each_message) must be true or false"),
    ],
    ids=["too-long", "list", "number", "nul", "unknown-model", "each-message"],
)
def test_bad_settings_are_400_with_a_reason_on_patch_create_and_import_and_nothing_is_written(
    api, made, chosen, detail
):
    url = f"/api/v1/sessions/{made['id']}/"
    response = api.patch(url, {"metadata": {"settings": chosen}}, format="json")
    assert response.status_code == 400
    assert detail in response.json()["detail"]
    assert api.get(url).json()["metadata"] == {}

    body = {"name": "new", "metadata": {"settings": chosen}}
    response = api.post("/api/v1/sessions/", body, format="json")
    assert response.status_code == 400
    assert detail in response.json()["detail"]

    document = api.get(f"{url}export/").json()
    document["session"]["metadata"] = {"settings": chosen}
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 400
    assert detail in response.json()["detail"]
    assert Session.objects.count() == 1


def test_another_users_session_is_404_and_keeps_its_instructions(api, bob_api, made):
    url = f"/api/v1/sessions/{made['id']}/"
    api.patch(url, {"metadata": {"settings": {"instructions": "mine"}}}, format="json")
    patch = {"metadata": {"settings": {"instructions": "pwned"}}}
    response = bob_api.patch(url, patch, format="json")
    assert response.status_code == 404
    assert api.get(url).json()["metadata"] == {"settings": {"instructions": "mine"}}
