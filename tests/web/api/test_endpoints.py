"""Each endpoint of the public contract: what it answers, and what bad input gets."""

from __future__ import annotations

import json

import pytest

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create
from sessions_app.models import Branch, Message, Session, Turn
from sessions_app.selectors import current_branch
from tests.conftest import grow, say
from tests.fakes.chat_server import Reply

pytestmark = pytest.mark.django_db
SESSION_FIELDS = {"id", "name", "created_at", "metadata", "current_branch", "branch_count"}
SESSION_FIELDS |= {"updated_at", "archived_at", "session_key"}
BRANCH_FIELDS = {"id", "session", "parent", "forked_from", "is_current", "message_count"}
MESSAGE_FIELDS = {"id", "role", "content", "tool_name", "tool_args", "tool_result", "created_at"}
CHECKPOINT_FIELDS = {"id", "name", "description", "is_auto", "branch", "message_count"}
TURN_FIELDS = {"id", "session", "branch", "status", "message", "reply", "tools_used"}
TURN_FIELDS |= {"checkpoint", "rolled_back_to", "error", "created_at", "finished_at"}


def test_create_list_get_patch_delete_a_session(api):
    response = api.post(
        "/api/v1/sessions/", {"name": "Trip", "metadata": {"tags": ["x"]}}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert set(body) >= SESSION_FIELDS
    assert body["branch_count"] == 1
    assert body["created_at"].endswith("Z")
    pk = body["id"]
    api.post("/api/v1/sessions/", {"name": "Second"}, format="json")
    listing = api.get("/api/v1/sessions/").json()
    assert set(listing) == {"count", "next", "previous", "results"}
    assert [s["name"] for s in listing["results"]] == ["Second", "Trip"]  # newest first
    assert api.get(f"/api/v1/sessions/{pk}/").json()["current_branch"] == body["current_branch"]
    patched = api.patch(f"/api/v1/sessions/{pk}/", {"name": "Rome"}, format="json").json()
    assert patched["name"] == "Rome"
    assert patched["metadata"] == {"tags": ["x"]}
    assert api.delete(f"/api/v1/sessions/{pk}/").status_code == 204
    assert api.get(f"/api/v1/sessions/{pk}/").status_code == 404


def test_pagination_limit_and_offset(api, alice):
    from sessions_app.services import session_create

    for i in range(5):
        session_create(owner=alice, name=f"s{i}")
    page = api.get("/api/v1/sessions/?limit=2&offset=1").json()
    assert page["count"] == 5
    assert len(page["results"]) == 2
    assert page["next"]
    assert page["previous"]
    big = api.get("/api/v1/sessions/?limit=100000").json()
    assert len(big["results"]) == 5


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, "name"),
        ({"name": 5}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 201}, "limit is 200"),
        ({"name": "ok", "metadata": [1]}, "metadata"),
        ({"name": "ok", "surprise": 1}, "surprise: Unknown field"),
        ([1, 2], "dictionary"),
    ],
)
def test_bad_session_input_is_400_and_nothing_is_written(api, body, says):
    response = api.post("/api/v1/sessions/", body, format="json")
    assert response.status_code == 400
    assert says in response.json()["detail"]
    assert not Session.objects.exists()


def test_malformed_json_is_400(api):
    response = api.generic("POST", "/api/v1/sessions/", "{nope", content_type="application/json")
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]
    assert not Session.objects.exists()


def test_messages_are_the_history_oldest_first_and_paged_by_position(api, session, branch):
    grow(branch, 120)
    first = api.get(f"/api/v1/sessions/{session.pk}/messages/").json()
    assert first["count"] == 120
    assert len(first["results"]) == 50
    assert set(first["results"][0]) >= MESSAGE_FIELDS
    assert first["results"][0]["content"] == "message 0"
    last = api.get(f"/api/v1/sessions/{session.pk}/messages/?limit=30&offset=100").json()
    assert [m["content"] for m in last["results"]][-1] == "message 119"
    assert last["next"] is None
    assert len(last["results"]) == 20


def test_messages_of_a_given_branch(api, session, branch):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="cp")
    say(branch, "c")
    from checkpoints.services import checkpoint_restore

    new = checkpoint_restore(checkpoint=cp).branch
    say(new, "x")
    old = api.get(f"/api/v1/sessions/{session.pk}/messages/?branch={branch.pk}").json()
    assert [m["content"] for m in old["results"]] == ["a", "b", "c"]
    now = api.get(f"/api/v1/sessions/{session.pk}/messages/").json()
    assert [m["content"] for m in now["results"]] == ["a", "b", "x"]


def test_a_branch_of_another_session_is_refused(api, alice, session):
    from sessions_app.services import session_create

    other = current_branch(session_create(owner=alice, name="other"))
    response = api.get(f"/api/v1/sessions/{session.pk}/messages/?branch={other.pk}")
    assert response.status_code == 400
    assert "not a branch of this session" in response.json()["detail"]


def test_branches_oldest_first_and_activate(api, session, branch):
    say(branch, "a")
    cp = checkpoint_create(branch=branch, name="cp")
    from checkpoints.services import checkpoint_restore

    new = checkpoint_restore(checkpoint=cp).branch
    listing = api.get(f"/api/v1/sessions/{session.pk}/branches/").json()["results"]
    assert [b["id"] for b in listing] == [branch.pk, new.pk]
    assert set(listing[0]) >= BRANCH_FIELDS
    assert listing[1]["forked_from"] == cp.pk
    response = api.post(f"/api/v1/branches/{branch.pk}/activate/")
    assert response.status_code == 200
    assert response.json()["is_current"] is True
    assert current_branch(session).pk == branch.pk


def test_checkpoints_create_list_get_delete(api, session, branch):
    say(branch, "a", "b")
    response = api.post(
        f"/api/v1/sessions/{session.pk}/checkpoints/",
        {"name": "after-intro", "description": "hi"},
        format="json",
    )
    assert response.status_code == 201
    cp = response.json()
    assert set(cp) >= CHECKPOINT_FIELDS
    assert cp["message_count"] == 2
    assert cp["is_auto"] is False
    unnamed = api.post(f"/api/v1/sessions/{session.pk}/checkpoints/", {}, format="json").json()
    listing = api.get(f"/api/v1/sessions/{session.pk}/checkpoints/").json()["results"]
    assert [c["id"] for c in listing] == [unnamed["id"], cp["id"]]  # newest first
    assert api.get(f"/api/v1/checkpoints/{cp['id']}/").json()["name"] == "after-intro"
    assert api.delete(f"/api/v1/checkpoints/{cp['id']}/").status_code == 204
    assert api.get(f"/api/v1/checkpoints/{cp['id']}/").status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"name": "n" * 201}, 400, "limit is 200"),
        ({"name": 3}, 400, "name"),
        ({"label": "x"}, 400, "label: Unknown field"),
    ],
)
def test_bad_checkpoint_input(api, session, body, status, says):
    response = api.post(f"/api/v1/sessions/{session.pk}/checkpoints/", body, format="json")
    assert response.status_code == status
    assert says in response.json()["detail"]
    assert not Checkpoint.objects.exists()


def test_restore_as_branch_and_as_rewind(api, session, branch):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="early")
    say(branch, "c", "d")
    late = checkpoint_create(branch=branch, name="late")
    restored = api.post(f"/api/v1/checkpoints/{cp.pk}/restore/", {}, format="json")
    assert restored.status_code == 200
    body = restored.json()
    assert body["deleted_checkpoints"] == []
    assert body["branch"]["is_current"] is True
    assert body["branch"]["parent"] == branch.pk
    assert body["branch"]["message_count"] == 2
    rewound = api.post(
        f"/api/v1/checkpoints/{cp.pk}/restore/", {"mode": "rewind"}, format="json"
    ).json()
    assert rewound["branch"]["id"] == branch.pk
    assert rewound["deleted_checkpoints"] == [late.pk]
    assert rewound["branch"]["message_count"] == 2


@pytest.mark.parametrize("body", [{"mode": "sideways"}, {"mode": 1}, {"mode": "branch", "x": 1}])
def test_bad_restore_input_is_400_and_nothing_changes(api, session, branch, body):
    cp = checkpoint_create(branch=branch, name="cp")
    response = api.post(f"/api/v1/checkpoints/{cp.pk}/restore/", body, format="json")
    assert response.status_code == 400
    assert "detail" in response.json()
    assert Branch.objects.count() == 1


def test_turn_is_202_then_readable(
    api, session, fake_llm, inline_turns, django_capture_on_commit_callbacks
):
    fake_llm.queue(Reply("Hello!"))
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/v1/sessions/{session.pk}/turns/", {"message": "hi"}, format="json"
        )
    assert response.status_code == 202
    turn = response.json()
    assert set(turn) >= TURN_FIELDS
    assert turn["status"] == "queued"
    assert turn["message"] == "hi"
    done = api.get(f"/api/v1/turns/{turn['id']}/").json()
    assert done["status"] == "done"
    assert done["reply"] == "Hello!"


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"message": ""}, 400, "empty"),
        ({"message": "   "}, 400, "empty"),
        ({"message": 5}, 400, "message"),
        ({}, 400, "message"),
        ({"message": "hi", "wait": "yes"}, 400, "wait"),
        ({"message": "hi", "extra": 1}, 400, "extra: Unknown field"),
        ({"message": "x" * 101}, 413, "limit is 100"),
    ],
)
def test_bad_turn_input_is_refused_before_the_model(
    api, session, fake_llm, settings, body, status, says
):
    settings.AGENT_MAX_INPUT_CHARS = 100
    response = api.post(f"/api/v1/sessions/{session.pk}/turns/", body, format="json")
    assert response.status_code == status
    assert says in response.json()["detail"]
    assert not Message.objects.exists()
    assert not Turn.objects.exists()
    assert fake_llm.requests == []


def test_a_turn_while_another_runs_is_409(api, session):
    assert (
        api.post(
            f"/api/v1/sessions/{session.pk}/turns/", {"message": "one"}, format="json"
        ).status_code
        == 202
    )
    response = api.post(f"/api/v1/sessions/{session.pk}/turns/", {"message": "two"}, format="json")
    assert response.status_code == 409
    assert "still answering" in response.json()["detail"]
    assert Message.objects.count() == 1


def test_an_idempotency_key_returns_the_first_turn(api, session):
    headers = {"HTTP_IDEMPOTENCY_KEY": "abc-123"}
    first = api.post(
        f"/api/v1/sessions/{session.pk}/turns/", {"message": "once"}, format="json", **headers
    )
    again = api.post(
        f"/api/v1/sessions/{session.pk}/turns/", {"message": "once"}, format="json", **headers
    )
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    assert Turn.objects.count() == 1
    assert Message.objects.count() == 1


def test_keys_create_shows_the_secret_once_list_and_revoke(api, alice):
    created = api.post("/api/v1/keys/", {"name": "ci"}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["key"].startswith("rbk_")
    assert body["prefix"] == body["key"][:12]
    listing = api.get("/api/v1/keys/").json()["results"]
    assert all("key" not in k for k in listing)
    assert any(k["id"] == body["id"] for k in listing)
    from rest_framework.test import APIClient

    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {body['key']}")
    assert other.get("/api/v1/sessions/").status_code == 200
    assert api.delete(f"/api/v1/keys/{body['id']}/").status_code == 204
    assert other.get("/api/v1/sessions/").status_code == 401
    assert api.post("/api/v1/keys/", {"name": ""}, format="json").status_code == 400


def test_export_then_import_gives_the_same_session(api, session, branch):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="cp")
    say(branch, "c")
    from checkpoints.services import checkpoint_restore

    checkpoint_restore(checkpoint=cp)
    document = api.get(f"/api/v1/sessions/{session.pk}/export/").json()
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 201
    copy = response.json()
    assert copy["branch_count"] == 2
    # Beside its original, the copy's name tells them apart (a moved one keeps it).
    assert copy["name"] == f"{session.session_name} (imported)"
    again = api.get(f"/api/v1/sessions/{copy['id']}/export/").json()

    def shape(doc):
        return [
            (
                b["fork_position"],
                b["is_current"],
                [m["content"] for m in b["messages"]],
                [c["name"] for c in b["checkpoints"]],
            )
            for b in doc["branches"]
        ]

    assert shape(again) == shape(document)


@pytest.mark.parametrize(
    "raw",
    [
        "{nope",
        "[]",
        '{"format": "other"}',
        json.dumps({"format": "rollback.session", "version": 2}),
    ],
)
def test_importing_something_else_is_400_and_nothing_is_written(api, raw):
    response = api.generic("POST", "/api/v1/sessions/import/", raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"]
    assert not Session.objects.exists()


def test_a_model_not_allowed_is_400_on_create_patch_and_import_and_nothing_is_written(
    api, settings
):
    settings.AGENT_MODEL, settings.AGENT_ALLOWED_MODELS = "house-model", []
    expensive = {"settings": {"model": "o1-pro", "temperature": 0.5}}
    response = api.post("/api/v1/sessions/", {"name": "s", "metadata": expensive}, format="json")
    assert response.status_code == 400
    assert "'o1-pro' is not allowed" in response.json()["detail"]
    assert not Session.objects.exists()
    body = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()
    for metadata in (expensive, {"settings": {"temperature": 3}}):
        response = api.patch(f"/api/v1/sessions/{body['id']}/", {"metadata": metadata}, "json")
        assert response.status_code == 400
        assert response.json()["detail"]
    assert api.get(f"/api/v1/sessions/{body['id']}/").json()["metadata"] == {}
    document = api.get(f"/api/v1/sessions/{body['id']}/export/").json()
    document["session"]["metadata"] = expensive
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 400
    assert "'o1-pro' is not allowed" in response.json()["detail"]
    assert Session.objects.count() == 1


def test_an_oversized_import_is_413(api, settings):
    settings.ROLLBACK_IMPORT_MAX_BYTES = 100
    raw = json.dumps({"format": "rollback.session", "version": 1, "pad": "x" * 200})
    response = api.generic("POST", "/api/v1/sessions/import/", raw, content_type="application/json")
    assert response.status_code == 413
    assert "limit is 100" in response.json()["detail"]


def test_throttling_answers_429_with_retry_after(api, monkeypatch):
    from rest_framework.throttling import SimpleRateThrottle

    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"user": "3/min", "anon": "3/min"})
    codes = [api.get("/api/v1/sessions/").status_code for _ in range(5)]
    assert codes[:3] == [200, 200, 200]
    assert codes[3] == 429
    response = api.get("/api/v1/sessions/")
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "throttled" in response.json()["detail"]


def test_createapikey_prints_the_key_alone_on_its_last_line(alice):
    from io import StringIO

    from django.core.management import call_command

    from accounts.services import apikey_authenticate

    out = StringIO()
    call_command("createapikey", "alice", "--name", "script", stdout=out, stderr=StringIO())
    key = out.getvalue().strip().splitlines()[-1]
    assert apikey_authenticate(key) == alice


def test_createapikey_for_an_unknown_user_fails():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="No user named"):
        call_command("createapikey", "nobody")
