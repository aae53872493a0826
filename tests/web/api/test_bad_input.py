"""Bad input at the API's edges is a 400 (or 404, 409, 413) with a readable {"detail"}, never a
500, and writes nothing: text that is not Unicode in a body, a path or a query string; a limit or
an offset that is not a non-negative integer; an Idempotency-Key reused with another body;
methods and media types a route does not take."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from accounts.models import ApiKey
from agents.models import McpServer
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create
from checkpoints.transfer import session_export
from memories.models import Memory
from memories.services import memory_create
from sessions_app.models import Branch, Message, Session, Turn
from sessions_app.turns import turn_fail, turn_start
from tests.conftest import say

pytestmark = pytest.mark.django_db

WRITES = ("post", "put", "patch")


def rows() -> dict[str, int]:
    models = (Session, Branch, Message, Checkpoint, Turn, ApiKey, Memory)
    return {model.__name__: model.objects.count() for model in models}


def _api_routes(patterns: list, prefix: str) -> list[tuple[str, type]]:
    found = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found += _api_routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            view = getattr(pattern.callback, "view_class", None)
            if view is not None:
                found.append((prefix + str(pattern.pattern), view))
    return found


def body_routes() -> list[tuple[str, str]]:
    """Every (method, route) of the API that takes a body, as the URLconf declares them: a new
    one is covered without being listed here."""
    return [
        (method.upper(), route)
        for route, view in _api_routes(get_resolver().url_patterns, "/")
        if route.startswith("/api/v1/")
        for method in WRITES
        if hasattr(view, method)
    ]


@pytest.fixture
def objects(alice, session, branch):
    say(branch, "hello", "hi")
    checkpoint = checkpoint_create(branch=branch, name="cp")
    turn = turn_start(session=session, message="again")
    turn_fail(turn=turn, error="no")
    memory = memory_create(user=alice, key="k", category="Project", l0_abstract="line")
    key = ApiKey.objects.filter(user=alice).first()
    McpServer.objects.create(name="tracker", url="http://127.0.0.1:9/mcp", user_headers=["X-Key"])
    return {
        "sessions": session.pk,
        "branches": branch.pk,
        "checkpoints": checkpoint.pk,
        "turns": turn.pk,
        "memories": memory.pk,
        "keys": key.pk,
        "messages": Message.objects.get(branch=branch, role="assistant").pk,  # "hi"
    }


def address(route: str, objects: dict[str, int]) -> str:
    """The route with the id of one of alice's objects of the kind it names."""
    kind = route.split("/")[3]
    return (
        re.sub(r"<int:pk>", str(objects.get(kind, 0)), route)
        .replace("<path:path>", "notes/body.txt")
        .replace("<str:name>", "tracker")  # an MCP server alice may use
    )


def test_the_walk_finds_the_routes_that_take_a_body():
    routes = body_routes()
    assert ("POST", "/api/v1/checkpoints/<int:pk>/restore/") in routes
    assert ("PATCH", "/api/v1/branches/<int:pk>/") in routes
    assert len(routes) >= 11


# --- Text that is not Unicode -----------------------------------------------------------------

# A lone surrogate is valid JSON (an escape) but no Unicode text: no database stores it and no
# answer quoting it can be encoded.
SURROGATE_BODIES = {
    "in a key": '{"\\ud800": 1}',
    "in a key beside known fields": '{"name": "x", "message": "hi", "\\udc00x": 1}',
    "in every value": json.dumps(
        {
            name: "\ud800"
            for name in ("name", "message", "mode", "session_key", "description", "key")
        },
        ensure_ascii=True,
    ),
    "deep in a value": '{"metadata": {"a": [{"b": "x\\udfff"}]}}',
}


# Routes that read no body: whatever is sent is ignored, so it changes nothing in the answer.
NO_BODY = (
    "/api/v1/turns/<int:pk>/cancel/",
    "/api/v1/branches/<int:pk>/activate/",
    "/api/v1/telegram/link/",
)
# A route whose body is a file's raw text, not JSON: a JSON escape in it is just characters, kept
# as sent (tests/web/api/test_files.py has its own bad bodies: binary, NUL, too large).
RAW_TEXT = ("/api/v1/sessions/<int:pk>/files/<path:path>",)


@pytest.mark.parametrize("body", SURROGATE_BODIES.values(), ids=SURROGATE_BODIES.keys())
@pytest.mark.parametrize(("method", "route"), body_routes())
def test_a_lone_surrogate_anywhere_in_a_body_is_400_and_writes_nothing(
    api, objects, method, route, body
):
    before = rows()
    response = api.generic(method, address(route, objects), body, content_type="application/json")
    if route in NO_BODY:
        plain = api.generic(method, address(route, objects))
        assert response.status_code == plain.status_code != 500
        return
    if route in RAW_TEXT:
        assert response.status_code == 201, (route, response.content)
        assert api.get(address(route, objects)).content == body.encode()
        return
    assert response.status_code == 400, (route, response.content)
    detail = response.json()["detail"]
    if route != "/api/v1/sessions/import/":
        assert "lone surrogate (U+D800 to U+DFFF)" in detail, detail
    assert rows() == before


def test_a_lone_surrogate_in_restores_mode_is_400_saying_where(api, objects):
    url = f"/api/v1/checkpoints/{objects['checkpoints']}/restore/"
    response = api.post(url, '{"mode": "\\ud800"}', content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "JSON parse error - the body holds a lone surrogate (U+D800 to U+DFFF), "
        "which is not valid Unicode, at mode."
    }


def test_an_unknown_field_named_with_a_lone_surrogate_is_quoted_as_an_escape(api, session):
    """An import reads its own body: what it refuses is quoted, the surrogate as an escape."""
    document = json.dumps(session_export(session=session))
    document = document.replace('"session": {', '"session": {"\\ud800x": 1, ', 1)
    before = rows()
    response = api.post("/api/v1/sessions/import/", document, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("Not a Rollback session export: session")
    assert rows() == before


def test_bytes_that_are_not_utf8_in_a_body_are_400(api):
    response = api.post("/api/v1/sessions/", b'{"name": "\xff"}', content_type="application/json")
    assert response.status_code == 400
    assert "can't decode" in response.json()["detail"]
    assert not Session.objects.exists()


@pytest.mark.parametrize(
    "query", ["q=%ED%A0%80", "q=%FF", "branch=%C3", "%FF=1", "limit=5&x=%ED%BF%BF"]
)
@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/sessions/",
        "/api/v1/sessions/{session}/messages/",
        "/api/v1/sessions/{session}/checkpoints/",
        "/api/v1/memories/",
    ],
)
def test_a_query_string_that_is_not_utf8_is_400(api, session, url, query):
    """Django would read each bad byte as U+FFFD: a search for something else than was sent."""
    response = api.get(url.format(session=session.pk) + "?" + query)
    assert response.status_code == 400
    assert response.json() == {
        "detail": "The query string is not valid UTF-8 text once percent-decoded (a byte that "
        "is no character, or a lone surrogate)."
    }


def test_the_api_answers_an_undecodable_query_string_in_json_with_debug_on_too(
    api, session, settings
):
    settings.DEBUG = True  # Django's debug page would answer a BadRequest in HTML
    response = api.get("/api/v1/sessions/?q=%FF")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"].startswith("The query string is not valid UTF-8")


def test_a_query_string_of_utf8_text_is_read(api, session):
    response = api.get("/api/v1/sessions/?q=%C3%A9t%C3%A9+%F0%9F%8E%89")
    assert response.status_code == 200


def test_a_page_with_a_query_string_that_is_not_utf8_is_400(client, alice, session):
    client.force_login(alice)
    assert client.get("/chat/sessions/?q=%FF").status_code == 400
    assert client.get("/chat/sessions/?q=%C3%A9").status_code == 200


def asgi_get(raw_path: bytes, query: bytes) -> tuple[int, bytes]:
    """A GET through the served app's HTTP handler, with the path and query string as a server
    gives them (bytes, percent-encoded)."""
    from asgiref.sync import async_to_sync
    from asgiref.testing import ApplicationCommunicator

    from rollback_site.http_handler import PooledHandler

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": raw_path.decode("ascii"),
        "raw_path": raw_path,
        "query_string": query,
        "headers": [(b"host", b"testserver")],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 1234),
    }

    handler = PooledHandler(threads=1)

    async def run() -> tuple[int, bytes]:
        communicator = ApplicationCommunicator(handler, scope)
        await communicator.send_input({"type": "http.request", "body": b""})
        start = await communicator.receive_output(10)
        body = await communicator.receive_output(10)
        return start["status"], body["body"]

    try:
        return async_to_sync(run)()
    finally:
        handler.pool.shutdown()


@pytest.mark.parametrize(
    ("raw_path", "query", "says"),
    [
        (b"/api/v1/sessions/%FF/", b"", "The address is not valid UTF-8 text."),
        (b"/api/v1/sessions/", b"q=%ED%A0%80", "The query string is not valid UTF-8"),
    ],
)
def test_under_asgi_an_address_that_is_not_utf8_is_400(raw_path, query, says):
    status, body = asgi_get(raw_path, query)
    assert status == 400
    assert json.loads(body)["detail"].startswith(says)


# --- limit and offset -------------------------------------------------------------------------

LISTS = [
    "/api/v1/sessions/",
    "/api/v1/sessions/{session}/messages/",
    "/api/v1/sessions/{session}/branches/",
    "/api/v1/sessions/{session}/effects/",
    "/api/v1/sessions/{session}/checkpoints/",
    "/api/v1/memories/",
    "/api/v1/keys/",
]


@pytest.mark.parametrize(
    "query",
    ["limit=-1", "limit=abc", "limit=1.5", "limit=%2B5", "limit=%205", "offset=-1", "offset=abc"],
)
@pytest.mark.parametrize("url", LISTS)
def test_a_limit_or_offset_that_is_not_a_non_negative_integer_is_400(api, session, url, query):
    response = api.get(url.format(session=session.pk) + "?" + query)
    assert response.status_code == 400, response.content
    name = query.split("=")[0]
    assert response.json() == {"detail": f"{name} must be a non-negative integer, like 0 or 50."}


@pytest.mark.parametrize("digits", [40, 5000])
@pytest.mark.parametrize("url", LISTS)
def test_an_offset_past_any_list_is_400_and_a_huge_limit_is_the_most(api, session, url, digits):
    response = api.get(url.format(session=session.pk) + "?offset=" + "9" * digits)
    assert response.status_code == 400
    assert response.json() == {"detail": "offset must be at most 9007199254740992."}
    response = api.get(url.format(session=session.pk) + "?limit=" + "9" * digits)
    assert response.status_code == 200


def test_limit_zero_answers_the_count_alone(api, session, branch):
    say(branch, "a", "b", "c")
    page = api.get(f"/api/v1/sessions/{session.pk}/messages/?limit=0&offset=1").json()
    assert page == {"count": 3, "next": None, "previous": None, "results": []}
    page = api.get("/api/v1/sessions/?limit=0").json()
    assert page == {"count": 1, "next": None, "previous": None, "results": []}


def test_an_empty_limit_or_offset_is_the_default(api, session, branch):
    say(branch, "a", "b", "c")
    page = api.get(f"/api/v1/sessions/{session.pk}/messages/?limit=&offset=").json()
    assert page["count"] == 3
    assert len(page["results"]) == 3


# --- Idempotency-Key --------------------------------------------------------------------------


def test_an_idempotency_key_reused_with_another_message_is_409_and_writes_nothing(api, session):
    url = f"/api/v1/sessions/{session.pk}/turns/"
    headers = {"HTTP_IDEMPOTENCY_KEY": "abc-123"}
    first = api.post(url, {"message": "once"}, format="json", **headers)
    assert first.status_code == 202
    before = rows()
    again = api.post(url, {"message": "something else"}, format="json", **headers)
    assert again.status_code == 409
    assert again.json() == {
        "detail": "This Idempotency-Key was already used in this session for another request "
        f"(turn {first.json()['id']}); send a new key with a new message."
    }
    assert rows() == before
    # The same request again still gets its turn, whatever the spacing and order of its keys.
    raw = '{ "wait" : false,\n "message": "once" }'
    retried = api.post(url, raw, content_type="application/json", **headers)
    assert retried.status_code == 202
    assert retried.json()["id"] == first.json()["id"]
    assert api.post(url, {"message": "once"}, format="json", **headers).status_code == 202


def test_an_idempotency_key_reused_with_another_body_on_chat_is_409(api):
    headers = {"HTTP_IDEMPOTENCY_KEY": "tg-update-991"}
    body = {"session_key": "agent:shket:main:1", "message": "once"}
    assert api.post("/api/v1/chat/", body, format="json", **headers).status_code == 202
    before = rows()
    other = {**body, "message": "twice"}
    response = api.post("/api/v1/chat/", other, format="json", **headers)
    assert response.status_code == 409
    assert "Idempotency-Key" in response.json()["detail"]
    assert rows() == before


def test_an_idempotency_key_of_a_turn_stored_without_a_fingerprint_compares_the_message(
    api, session
):
    """Turns queued before fingerprints were kept: the message tells a retry from a reuse."""
    turn = turn_start(session=session, message="once", idempotency_key="old-key")
    url = f"/api/v1/sessions/{session.pk}/turns/"
    headers = {"HTTP_IDEMPOTENCY_KEY": "old-key"}
    same = api.post(url, {"message": "once"}, format="json", **headers)
    assert same.status_code == 202
    assert same.json()["id"] == turn.pk
    assert api.post(url, {"message": "other"}, format="json", **headers).status_code == 409


# --- Methods and media types ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("PUT", "/api/v1/sessions/"),
        ("DELETE", "/api/v1/chat/"),
        ("PUT", "/api/v1/schema/"),
        ("POST", "/api/v1/schema/"),
        ("POST", "/api/v1/docs/"),
        ("DELETE", "/api/v1/docs/"),
    ],
)
def test_a_method_a_route_does_not_take_is_a_json_405(api, method, url):
    response = api.generic(method, url)
    assert response.status_code == 405
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": f'Method "{method}" not allowed.'}


@pytest.mark.parametrize("url", ["/api/v1/sessions/", "/api/v1/keys/", "/api/v1/memories/"])
def test_a_body_that_is_not_json_is_a_json_415(api, url):
    response = api.post(url, "name=x", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert response.json() == {
        "detail": 'Unsupported media type "application/x-www-form-urlencoded" in request.'
    }


def test_a_missing_route_under_the_api_is_a_json_404(api):
    for method in ("GET", "POST", "PUT", "DELETE"):
        response = api.generic(method, "/api/v1/nothing/here/")
        assert response.status_code == 404
        assert response.json() == {"detail": "Not found."}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_racing_requests_with_one_key_and_two_bodies_make_one_turn_and_409_the_other_body(
    alice, session
):
    """Both bodies race past the first lookup: the loser's path (TurnInProgress, the unique key)
    compares the body too."""
    import threading

    from django.db import connection

    from tests.web.api.conftest import bearer_client

    url = f"/api/v1/sessions/{session.pk}/turns/"
    clients = [bearer_client(alice) for _ in range(6)]
    answers: list[tuple[str, int, dict]] = []
    barrier = threading.Barrier(len(clients))

    def post(i: int) -> None:
        message = "first" if i % 2 == 0 else "second"
        try:
            barrier.wait()
            response = clients[i].post(
                url, {"message": message}, format="json", HTTP_IDEMPOTENCY_KEY="race-1"
            )
            answers.append((message, response.status_code, response.json()))
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == len(clients)
    turn = Turn.objects.get(session=session)
    for message, status, body in answers:
        if message == turn.message:
            assert status == 202
            assert body["id"] == turn.pk
        else:
            assert status == 409
            assert "Idempotency-Key" in body["detail"]
    assert Message.objects.filter(branch__session=session, role="user").count() == 1
