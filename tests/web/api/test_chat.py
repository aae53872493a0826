"""POST /api/v1/chat/: a turn on the session of an integration's session key, made on first use;
finding sessions by key; bad keys refused with nothing written."""

from __future__ import annotations

import json

import pytest

from sessions_app.models import Message, Session, Turn
from tests.fakes.chat_server import Reply
from tests.web.api.conftest import bearer_client

KEY = "agent:shket:main:12345"


@pytest.fixture
def api(api):
    api.default_format = "json"
    return api


@pytest.fixture
def bob_api(bob_api):
    bob_api.default_format = "json"
    return bob_api


def _rows() -> tuple[int, int, int]:
    return Session.objects.count(), Turn.objects.count(), Message.objects.count()


def _contents(server, i=-1):
    return [(m["role"], m.get("content") or "") for m in server.messages(i)[1:]]


@pytest.mark.django_db(transaction=True)
def test_the_first_post_makes_the_session_and_the_second_continues_it(
    alice, fake_llm, inline_turns
):
    api = bearer_client(alice)
    api.default_format = "json"
    fake_llm.queue(Reply("Hello, Telegram."))
    first = api.post("/api/v1/chat/", {"session_key": KEY, "message": "hi", "wait": True})
    assert first.status_code == 201, first.json()
    turn = first.json()
    assert turn["status"] == "done"
    assert turn["reply"] == "Hello, Telegram."
    session = Session.objects.get(owner=alice)
    assert turn["session"] == session.pk
    assert session.session_key == KEY
    assert session.session_name == "shket · main · 12345"
    shown = api.get(f"/api/v1/sessions/{session.pk}/").json()
    assert shown["session_key"] == KEY

    fake_llm.queue(Reply("Still here."))
    second = api.post("/api/v1/chat/", {"session_key": KEY, "message": "again?", "wait": True})
    assert second.status_code == 201
    assert second.json()["session"] == session.pk
    assert Session.objects.filter(owner=alice).count() == 1
    # The model was sent the earlier exchange: the history goes on.
    assert _contents(fake_llm) == [
        ("user", "hi"),
        ("assistant", "Hello, Telegram."),
        ("user", "again?"),
    ]


@pytest.mark.django_db
def test_without_wait_the_answer_is_202_with_the_queued_turn(api, alice):
    response = api.post("/api/v1/chat/", {"session_key": KEY, "message": "hi"}, format="json")
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    assert Turn.objects.get().session.session_key == KEY


@pytest.mark.django_db
def test_the_same_chat_id_under_two_scopes_is_two_sessions(api, alice):
    for key in ("agent:shket:main:12345", "agent:shket:per-peer:12345"):
        response = api.post("/api/v1/chat/", {"session_key": key, "message": "hi"}, format="json")
        assert response.status_code == 202, response.json()
    keys = sorted(Session.objects.filter(owner=alice).values_list("session_key", flat=True))
    assert keys == ["agent:shket:main:12345", "agent:shket:per-peer:12345"]


@pytest.mark.django_db
def test_keys_are_case_sensitive_and_the_agent_id_counts(api, alice):
    for key in ("agent:shket:main:abc", "agent:shket:main:ABC", "agent:other:main:abc"):
        assert api.post("/api/v1/chat/", {"session_key": key, "message": "hi"}).status_code == 202
    assert Session.objects.filter(owner=alice).count() == 3


@pytest.mark.django_db
def test_two_users_with_the_same_key_each_get_their_own_session(api, bob_api, alice, bob):
    mine = api.post("/api/v1/chat/", {"session_key": KEY, "message": "alice here"}).json()
    alices = Session.objects.get(owner=alice)
    before = (alices.session_name, list(Message.objects.filter(branch__session=alices)))
    theirs = bob_api.post("/api/v1/chat/", {"session_key": KEY, "message": "bob here"})
    assert theirs.status_code == 202  # not 409: alice's queued turn is not bob's business
    bobs = Session.objects.get(owner=bob)
    assert theirs.json()["session"] == bobs.pk != mine["session"] == alices.pk
    alices.refresh_from_db()
    assert (alices.session_name, list(Message.objects.filter(branch__session=alices))) == before
    # Each finds only their own by the key.
    found = bob_api.get("/api/v1/sessions/", {"session_key": KEY}).json()
    assert [s["id"] for s in found["results"]] == [bobs.pk]
    assert bob_api.get(f"/api/v1/sessions/{alices.pk}/").status_code == 404


@pytest.mark.django_db
def test_a_post_while_a_turn_of_that_session_is_queued_is_409(api):
    assert api.post("/api/v1/chat/", {"session_key": KEY, "message": "one"}).status_code == 202
    before = _rows()
    response = api.post("/api/v1/chat/", {"session_key": KEY, "message": "two"})
    assert response.status_code == 409
    assert "still answering" in response.json()["detail"]
    assert _rows() == before


@pytest.mark.django_db
def test_an_idempotency_key_returns_the_first_turn(api):
    headers = {"HTTP_IDEMPOTENCY_KEY": "tg-update-991"}
    body = {"session_key": KEY, "message": "once"}
    first = api.post("/api/v1/chat/", body, format="json", **headers)
    again = api.post("/api/v1/chat/", body, format="json", **headers)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    assert _rows() == (1, 1, 1)
    too_long = api.post("/api/v1/chat/", body, format="json", HTTP_IDEMPOTENCY_KEY="k" * 201)
    assert too_long.status_code == 400
    assert _rows() == (1, 1, 1)


@pytest.mark.django_db
def test_sessions_are_found_by_their_exact_key(api, alice, session):
    api.post("/api/v1/chat/", {"session_key": KEY, "message": "hi"})
    api.post("/api/v1/chat/", {"session_key": KEY + "6", "message": "hi"})
    keyed = Session.objects.get(owner=alice, session_key=KEY)
    found = api.get("/api/v1/sessions/", {"session_key": KEY}).json()
    assert found["count"] == 1
    assert found["results"][0]["id"] == keyed.pk
    assert found["results"][0]["session_key"] == KEY
    # A session made otherwise has none.
    assert api.get(f"/api/v1/sessions/{session.pk}/").json()["session_key"] is None
    assert api.get("/api/v1/sessions/", {"session_key": "agent:shket:main:9"}).json()["count"] == 0
    # q= matches keys too (by substring, like names).
    by_q = api.get("/api/v1/sessions/", {"q": "12345"}).json()
    assert by_q["count"] == 2
    assert session.pk not in [s["id"] for s in by_q["results"]]
    bad = api.get("/api/v1/sessions/", {"session_key": "agent:shket:nope:1"})
    assert bad.status_code == 400
    assert "Expected agent:<agentId>:<scope>:<chatId>" in (bad.json()["detail"])


@pytest.mark.django_db
def test_the_key_is_not_changed_through_patch(api, alice):
    sid = api.post("/api/v1/chat/", {"session_key": KEY, "message": "hi"}).json()["session"]
    response = api.patch(
        f"/api/v1/sessions/{sid}/", {"session_key": "agent:x:main:1"}, format="json"
    )
    assert response.status_code == 400
    assert "session_key" in response.json()["detail"]
    renamed = api.patch(f"/api/v1/sessions/{sid}/", {"name": "Renamed"}, format="json").json()
    assert renamed["name"] == "Renamed"
    assert renamed["session_key"] == KEY
    Turn.objects.update(status="done")
    assert api.post("/api/v1/chat/", {"session_key": KEY, "message": "x"}).json()["session"] == sid


@pytest.mark.django_db
def test_a_message_to_an_archived_keys_session_unarchives_it(api, alice):
    sid = api.post("/api/v1/chat/", {"session_key": KEY, "message": "hi"}).json()["session"]
    Turn.objects.update(status="done")
    api.patch(f"/api/v1/sessions/{sid}/", {"archived": True}, format="json")
    again = api.post("/api/v1/chat/", {"session_key": KEY, "message": "back"})
    assert again.status_code == 202
    assert again.json()["session"] == sid
    # The message brought the session back from the archive.
    listed = api.get("/api/v1/sessions/", {"session_key": KEY}).json()
    assert [s["id"] for s in listed["results"]] == [sid]
    assert listed["results"][0]["archived_at"] is None


@pytest.mark.django_db
def test_a_deleted_sessions_key_makes_a_new_session(api, alice):
    sid = api.post("/api/v1/chat/", {"session_key": KEY, "message": "hi"}).json()["session"]
    assert api.delete(f"/api/v1/sessions/{sid}/").status_code == 204
    again = api.post("/api/v1/chat/", {"session_key": KEY, "message": "hi"})
    assert again.status_code == 202
    assert again.json()["session"] != sid


@pytest.mark.django_db
def test_over_the_sessions_limit_a_new_key_is_409_and_a_known_key_still_works(api, alice, settings):
    settings.ROLLBACK_MAX_SESSIONS_PER_USER = 1
    assert api.post("/api/v1/chat/", {"session_key": KEY, "message": "hi"}).status_code == 202
    Turn.objects.update(status="done")
    before = _rows()
    response = api.post("/api/v1/chat/", {"session_key": KEY + "0", "message": "hi"})
    assert response.status_code == 409
    assert "the most one account may keep is 1" in (response.json()["detail"])
    assert _rows() == before
    assert api.post("/api/v1/chat/", {"session_key": KEY, "message": "more"}).status_code == 202


MALFORMED = [
    pytest.param("", id="empty"),
    pytest.param("agent:shket:main", id="missing chat id part"),
    pytest.param("agent:shket", id="missing parts"),
    pytest.param("shket:main:12345", id="no agent prefix"),
    pytest.param("Agent:shket:main:1", id="prefix is case-sensitive"),
    pytest.param("agent::main:1", id="empty agent id"),
    pytest.param("agent:sh ket:main:1", id="space in agent id"),
    pytest.param("agent:" + "a" * 65 + ":main:1", id="agent id too long"),
    pytest.param("agent:shket:global:1", id="unknown scope"),
    pytest.param("agent:shket:Main:1", id="scope is case-sensitive"),
    pytest.param("agent:shket:main:", id="empty chat id"),
    pytest.param("agent:shket:main:" + "9" * 129, id="chat id too long"),
    pytest.param("agent:shket:main:" + "9" * 10_000, id="key far too long"),
    pytest.param("agent:shket:main:12 345", id="space in chat id"),
    pytest.param(" agent:shket:main:1", id="leading space"),
    pytest.param("agent:shket:main:1\n", id="trailing newline"),
    pytest.param("agent:shket:main:1\x00", id="NUL"),
    pytest.param("agent:shket:main:1\x1b[31m", id="escape sequence"),
    pytest.param("agent:shket:main:1\u200b", id="zero-width space"),
    pytest.param("agent:shket:main:1\u202e", id="bidi override"),
    pytest.param("agent:shkét:main:1", id="non-ASCII agent id"),
]


@pytest.mark.django_db
def test_a_key_with_a_lone_surrogate_is_refused_with_the_body_and_nothing_is_written(api, alice):
    """No JSON body holding a lone surrogate reaches a view (core.parsers); the answer says
    where it is."""
    before = _rows()
    body = json.dumps({"session_key": "agent:shket:main:\ud800", "message": "hi"})
    response = api.post("/api/v1/chat/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert "lone surrogate" in response.json()["detail"]
    assert "at session_key." in response.json()["detail"]
    assert _rows() == before


@pytest.mark.django_db
@pytest.mark.parametrize("key", MALFORMED)
def test_a_malformed_key_is_400_saying_the_form_and_nothing_is_written(api, alice, key):
    before = _rows()
    response = api.post(
        "/api/v1/chat/",
        json.dumps({"session_key": key, "message": "hi"}),
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert "Malformed session key" in detail
    assert "agent:<agentId>:<scope>:<chatId>" in detail
    assert _rows() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"session_key": 12345, "message": "hi"}, id="key a number"),
        pytest.param({"session_key": True, "message": "hi"}, id="key a boolean"),
        pytest.param({"session_key": None, "message": "hi"}, id="key null"),
        pytest.param({"session_key": ["agent:a:main:1"], "message": "hi"}, id="key a list"),
        pytest.param({"session_key": {"agent": "a"}, "message": "hi"}, id="key an object"),
        pytest.param({"message": "hi"}, id="no key"),
        pytest.param({"session_key": KEY}, id="no message"),
        pytest.param({"session_key": KEY, "message": ""}, id="empty message"),
        pytest.param({"session_key": KEY, "message": "   "}, id="blank message"),
        pytest.param({"session_key": KEY, "message": 5}, id="message a number"),
        pytest.param({"session_key": KEY, "message": "hi", "wait": "yes"}, id="wait not bool"),
        pytest.param({"session_key": KEY, "message": "hi", "extra": 1}, id="unknown field"),
        pytest.param({"session_key": KEY, "message": "hi", "session": 1}, id="a session id"),
        pytest.param([KEY, "hi"], id="not an object"),
    ],
)
def test_bad_bodies_are_400_and_nothing_is_written(api, alice, body):
    before = _rows()
    response = api.post("/api/v1/chat/", json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["detail"]
    assert _rows() == before


@pytest.mark.django_db
def test_an_oversized_message_is_413_and_no_session_is_made(api, alice, settings):
    settings.AGENT_MAX_INPUT_CHARS = 10
    before = _rows()
    response = api.post("/api/v1/chat/", {"session_key": KEY, "message": "x" * 11})
    assert response.status_code == 413
    assert _rows() == before


@pytest.mark.django_db
def test_not_json_is_a_4xx_not_a_500(api):
    response = api.post("/api/v1/chat/", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert _rows() == (0, 0, 0)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "key",
    [
        "agent:shket:main:12345",
        "agent:shket:per-peer:-1001234567890",
        "agent:my_bot.v2-beta:per-channel-peer:telegram:12345",
        "agent:x:per-channel-peer:@alice:matrix.org",
        "agent:x:main:ünïcødé",
        "agent:x:main:<b>&\"'",
        "agent:" + "a" * 64 + ":per-channel-peer:" + "c" * 128,
    ],
)
def test_well_formed_keys_are_taken_exactly_as_given(api, alice, key):
    response = api.post("/api/v1/chat/", {"session_key": key, "message": "hi"}, format="json")
    assert response.status_code == 202, response.json()
    shown = api.get(f"/api/v1/sessions/{response.json()['session']}/").json()
    assert shown["session_key"] == key
