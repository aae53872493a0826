"""Limits on what the API accepts: nesting, text no database can hold, sizes, times, how many
sessions. Every refusal is a clear 4xx with {"detail"}, and nothing is written."""

from __future__ import annotations

import copy
import json

import pytest

from accounts.models import ApiKey
from accounts.services import API_KEYS_ACTIVE_MAX, apikey_create
from checkpoints.models import Checkpoint
from checkpoints.transfer import session_export
from sessions_app.models import Branch, Message, Session, Turn
from sessions_app.services import session_create
from tests.conftest import say

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000 + "]" * 100_000  # Python's json gives up (RecursionError) long before


def rows() -> dict[str, int]:
    """How many rows of each kind the API can write."""
    models = (Session, Branch, Message, Checkpoint, Turn, ApiKey)
    return {model.__name__: model.objects.count() for model in models}


def post_raw(api, url: str, raw: str, method: str = "POST"):
    return api.generic(method, url, raw, content_type="application/json")


# --- nesting ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("POST", "/api/v1/sessions/"),
        ("PATCH", "/api/v1/sessions/{session}/"),
        ("POST", "/api/v1/sessions/{session}/turns/"),
        ("POST", "/api/v1/sessions/{session}/checkpoints/"),
        ("POST", "/api/v1/sessions/import/"),
        ("POST", "/api/v1/keys/"),
    ],
)
def test_a_body_nested_past_pythons_recursion_limit_is_400(api, session, method, url):
    before = rows()
    response = post_raw(api, url.format(session=session.pk), DEEP, method)
    assert response.status_code == 400
    assert "nested more than" in response.json()["detail"]
    assert rows() == before


@pytest.mark.parametrize("method", ["POST", "PATCH"])
def test_metadata_nested_deeper_than_32_levels_is_400(api, session, method):
    metadata = "{}"
    for _ in range(32):
        metadata = '{"a": %s}' % metadata  # noqa: UP031 - 33 levels of JSON text
    url = "/api/v1/sessions/" if method == "POST" else f"/api/v1/sessions/{session.pk}/"
    before = rows()
    response = post_raw(api, url, '{"name": "deep", "metadata": %s}' % metadata, method)  # noqa: UP031 - JSON text
    assert response.status_code == 400
    assert response.json()["detail"] == "The session metadata is nested more than 32 levels deep."
    assert rows() == before
    session.refresh_from_db()
    assert session.metadata == {}
    assert session.session_name == "Python basics"


# --- text no database can hold --------------------------------------------------------------


@pytest.mark.parametrize(
    ("escape", "says"),
    [
        ("\\u0000", "The session metadata cannot contain NUL characters."),
        # Refused with the body, before the service sees it (core.parsers).
        ("\\ud800", "JSON parse error - the body holds a lone surrogate"),
    ],
)
def test_nul_or_a_lone_surrogate_in_new_session_metadata_is_400(api, escape, says):
    for metadata in ('{"note": "a%sb"}', '{"a%s": 1}', '{"list": [["%s"]]}'):
        raw = '{"name": "x", "metadata": %s}' % (metadata % escape)
        response = post_raw(api, "/api/v1/sessions/", raw)
        assert response.status_code == 400, raw
        assert response.json()["detail"].startswith(says)
    assert not Session.objects.exists()
    assert api.get("/api/v1/sessions/").status_code == 200


@pytest.mark.parametrize("escape", ["\\u0000", "\\udc00"])
def test_nul_or_a_lone_surrogate_in_changed_metadata_is_400_and_changes_nothing(
    api, session, escape
):
    raw = '{"name": "Renamed", "metadata": {"note": "%s"}}' % escape  # noqa: UP031 - JSON text
    response = post_raw(api, f"/api/v1/sessions/{session.pk}/", raw, "PATCH")
    detail = response.json()["detail"]
    assert response.status_code == 400
    assert "metadata cannot contain" in detail or (
        "lone surrogate" in detail and "metadata.note" in detail
    )
    session.refresh_from_db()
    assert session.session_name == "Python basics"
    assert session.metadata == {}
    assert api.get(f"/api/v1/sessions/{session.pk}/").status_code == 200


# --- sizes ------------------------------------------------------------------------------------


def test_session_metadata_over_64_kib_is_413_and_nothing_is_written(api, session):
    big = {"blob": "x" * (64 * 1024)}
    response = api.post("/api/v1/sessions/", {"name": "big", "metadata": big}, format="json")
    assert response.status_code == 413
    assert "limit is 65536 bytes" in response.json()["detail"]
    response = api.patch(f"/api/v1/sessions/{session.pk}/", {"metadata": big}, format="json")
    assert response.status_code == 413
    assert Session.objects.count() == 1
    session.refresh_from_db()
    assert session.metadata == {}


def test_session_metadata_at_the_limit_is_accepted_and_one_byte_more_is_not(api, settings):
    settings.ROLLBACK_METADATA_MAX_BYTES = 1000
    metadata = {"blob": "é" * 100 + "x" * (1000 - len('{"blob":""}') - 200)}
    response = api.post("/api/v1/sessions/", {"name": "full", "metadata": metadata}, format="json")
    assert response.status_code == 201
    assert response.json()["metadata"] == metadata
    metadata["blob"] += "x"
    response = api.post("/api/v1/sessions/", {"name": "over", "metadata": metadata}, format="json")
    assert response.status_code == 413
    assert response.json()["detail"] == (
        "The session metadata is 1001 bytes as JSON; the limit is 1000 bytes."
    )


# --- imported times ---------------------------------------------------------------------------


def _document(session, branch) -> dict:
    say(branch, "hello", "hi")
    return json.loads(json.dumps(session_export(session=session)))


@pytest.mark.parametrize(
    "where",
    ["session", "branch", "message", "checkpoint"],
)
@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00"])
def test_an_import_with_a_time_python_cannot_hold_is_400_and_nothing_is_written(
    api, session, branch, where, when
):
    from checkpoints.services import checkpoint_create

    checkpoint_create(branch=branch, name="cp")
    document = _document(session, branch)
    target = {
        "session": document["session"],
        "branch": document["branches"][0],
        "message": document["branches"][0]["messages"][1],
        "checkpoint": document["branches"][0]["checkpoints"][0],
    }[where]
    target["created_at"] = when
    before = rows()
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 400
    assert "is out of range: times must lie between 1970-01-01" in response.json()["detail"]
    assert rows() == before
    # And every page that lists the owner's sessions still answers.
    assert api.get("/api/v1/sessions/").status_code == 200


# --- searching ------------------------------------------------------------------------------


def test_search_finds_names_and_message_text(api, alice, session, branch):
    say(branch, "Tell me about the Colosseum", "It is in Rome.")
    session_create(owner=alice, name="Trip to ROME")
    session_create(owner=alice, name="Groceries")
    found = api.get("/api/v1/sessions/", {"q": "rome"}).json()
    assert sorted(s["name"] for s in found["results"]) == ["Python basics", "Trip to ROME"]
    assert api.get("/api/v1/sessions/", {"q": ""}).json()["count"] == 3


def test_search_with_a_nul_character_is_400(api, session):
    response = api.get("/api/v1/sessions/?q=a%00b")
    assert response.status_code == 400
    assert response.json() == {"detail": "The search cannot contain NUL characters."}


def test_search_does_not_reach_another_users_sessions(api, alice, bob):
    session_create(owner=alice, name="Groceries")
    other = session_create(owner=bob, name="Bob's rome notes")
    say(Branch.objects.get(session=other), "rome")
    assert api.get("/api/v1/sessions/", {"q": "rome"}).json()["count"] == 0


# --- how many ----------------------------------------------------------------------------------


def test_sessions_over_the_per_user_limit_are_409_on_create_and_import(
    api, bob_api, alice, session, branch, settings
):
    settings.ROLLBACK_MAX_SESSIONS_PER_USER = 2
    document = _document(session, branch)
    assert api.post("/api/v1/sessions/", {"name": "second"}, format="json").status_code == 201
    before = rows()
    response = api.post("/api/v1/sessions/", {"name": "third"}, format="json")
    assert response.status_code == 409
    assert response.json()["detail"] == (
        "You have 2 sessions; the most one account may keep is 2. "
        "Delete some you no longer need first."
    )
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 409
    assert rows() == before
    # Archived sessions count too; another user has room of their own; deleting makes room.
    assert bob_api.post("/api/v1/sessions/", {"name": "bob's"}, format="json").status_code == 201
    assert api.delete(f"/api/v1/sessions/{session.pk}/").status_code == 204
    assert api.post("/api/v1/sessions/import/", document, format="json").status_code == 201


def test_the_default_limits(settings):
    assert settings.ROLLBACK_MAX_SESSIONS_PER_USER == 10_000
    assert settings.ROLLBACK_METADATA_MAX_BYTES == 64 * 1024
    assert settings.ROLLBACK_STATE_MAX_BYTES == 64 * 1024


def test_the_api_key_limit_holds_through_the_api(api, alice):
    for i in range(API_KEYS_ACTIVE_MAX - 1):  # the fixture's key is the first
        apikey_create(user=alice, name=f"k{i}")
    response = api.post("/api/v1/keys/", {"name": "one too many"}, format="json")
    assert response.status_code == 400
    assert "revoke one" in response.json()["detail"]
    assert ApiKey.objects.filter(user=alice).count() == API_KEYS_ACTIVE_MAX


def test_an_import_copy_is_not_changed_by_the_checks(api, session, branch):
    """What passes the checks is stored as it was sent."""
    document = _document(session, branch)
    document["session"]["metadata"] = {"tags": ["ü", "🎉"], "n": 1.5}
    document["branches"][0]["session_state"] = {"deep": [[[[{"x": None}]]]]}
    response = api.post("/api/v1/sessions/import/", copy.deepcopy(document), format="json")
    assert response.status_code == 201
    copied = Session.objects.get(pk=response.json()["id"])
    assert copied.metadata == document["session"]["metadata"]
    assert Branch.objects.get(session=copied).session_state == {"deep": [[[[{"x": None}]]]]}


# --- imported messages --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "field", "says"),
    [
        (
            "user",
            "content",
            "The content of message 0 of branch {b} is 101 characters long; "
            "the limit for a user's message is 100.",
        ),
        (
            "assistant",
            "content",
            "The content of message 1 of branch {b} is 201 characters long; the limit is 200.",
        ),
        (
            "tool",
            "tool_result",
            "The tool_result of message 1 of branch {b} is 201 characters long; the limit is 200.",
        ),
        (
            "tool",
            "tool_args",
            "The tool_args of message 1 of branch {b} are longer than 200 characters as JSON.",
        ),
    ],
)
def test_an_imported_message_over_the_limits_of_typed_and_generated_ones_is_413(
    api, session, branch, settings, role, field, says
):
    """A user's message is at most AGENT_MAX_INPUT_CHARS, the agent's texts at most
    AGENT_MAX_REPLY_CHARS, whichever way they arrive: an import of 20,000,000 characters in one
    message would make its page take seconds and megabytes to render."""
    settings.AGENT_MAX_INPUT_CHARS = 100
    settings.AGENT_MAX_REPLY_CHARS = 200
    document = _document(session, branch)
    message = document["branches"][0]["messages"][0 if role == "user" else 1]
    message["role"] = role
    message[field] = (
        {"text": "x" * 200} if field == "tool_args" else "x" * (101 if role == "user" else 201)
    )
    before = rows()
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 413, response.content
    assert response.json()["detail"] == "Cannot import this document: " + says.format(
        b=document["branches"][0]["id"]
    )
    assert rows() == before


def test_imported_messages_at_the_limits_and_replies_cut_off_there_import(
    api, session, branch, settings
):
    from sessions_app.turns import bounded

    settings.AGENT_MAX_INPUT_CHARS = 100
    settings.AGENT_MAX_REPLY_CHARS = 200
    document = _document(session, branch)
    user, reply = document["branches"][0]["messages"]
    user["content"] = "u" * 100
    reply["content"] = bounded("r" * 5000, 200)  # as a reply cut off by the limit is stored
    reply["tool_args"] = {"cut_off": bounded("{" * 5000, 200)}
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 201, response.content
    copied = Branch.objects.get(session_id=response.json()["id"])
    assert Message.objects.get(branch=copied, position=1).content == reply["content"]


def test_the_page_import_refuses_an_oversized_message_with_a_notice(
    client, alice, session, branch, settings
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.AGENT_MAX_INPUT_CHARS = 100
    document = _document(session, branch)
    document["branches"][0]["messages"][0]["content"] = "x" * 101
    client.force_login(alice)
    upload = SimpleUploadedFile("s.json", json.dumps(document).encode(), "application/json")
    before = rows()
    response = client.post("/chat/import/", {"document": upload}, follow=True)
    assert response.status_code == 200
    assert "the limit for a user&#x27;s message is 100" in response.content.decode()
    assert rows() == before
