"""Every route and method of /api/v1/: credentials required, and another user's objects are a
404, exactly like missing ones. The routes are read from the URLconf, so a new route cannot be
left out: it fails here until it is listed."""

from __future__ import annotations

import pytest
from django.urls import URLPattern

from accounts.services import apikey_create
from agents.models import McpServer
from checkpoints.models import ImportJob
from checkpoints.services import checkpoint_create
from memories.services import memory_create
from sessions_app.models import Message, Turn
from sharing.services import share_create
from tests.conftest import say
from web.api import urls as api_urls
from workspace.services import file_write

pytestmark = pytest.mark.django_db
PUBLIC = {"schema", "docs"}
WITHOUT_ID = {
    "sessions",
    "session-import",
    "keys",
    "chat",
    "memories",
    "shares",
    "telegram-link",
    "mcp-servers",
    "usage",
}


def _routes():
    for pattern in api_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        if pattern.callback is api_urls.not_found:
            continue  # the JSON 404 for every other address
        view = pattern.callback.view_class
        methods = [m for m in ("get", "post", "patch", "put", "delete") if hasattr(view, m)]
        yield pattern.name, str(pattern.pattern), methods


@pytest.fixture
def alices_objects(alice, session, branch):
    say(branch, "hello", "hi")
    checkpoint = checkpoint_create(branch=branch, name="cp")
    turn = Turn.objects.create(
        session=session,
        branch=branch,
        user_message=Message.objects.filter(branch=branch).first(),
        status="done",
    )
    key, _ = apikey_create(user=alice, name="alice's key")
    memory = memory_create(user=alice, key="editor", category="Project", l0_abstract="Helix")
    file_write(branch=branch, path="notes/a.md", content="alice's notes")
    share, _ = share_create(owner=alice, branch=branch)
    # An MCP server for alice alone: bob may not use it, so it is not his to find.
    server = McpServer.objects.create(
        name="alices", url="http://127.0.0.1:9/mcp", for_everyone=False
    )
    server.users.add(alice)
    return {
        "session": session.pk,
        "messages": session.pk,
        "turns": session.pk,
        "branches": session.pk,
        "effects": session.pk,
        "checkpoints": session.pk,
        "export": session.pk,
        "files": session.pk,
        "file": session.pk,
        "turn": turn.pk,
        "turn-cancel": turn.pk,
        "turn-approve": turn.pk,
        "branch": branch.pk,
        "activate": branch.pk,
        "context": branch.pk,
        "checkpoint": checkpoint.pk,
        "restore": checkpoint.pk,
        "key": key.pk,
        "memory": memory.pk,
        "diff": session.pk,
        "branch-share": branch.pk,
        "share": share.pk,
        "mcp-credentials": server.name,
        "import": ImportJob.objects.create(owner=alice, source="chatgpt", total=2).pk,
        "message-feedback": Message.objects.filter(branch=branch, role="assistant").get().pk,
    }


def _url(route: str, pk) -> str:
    route = route.replace("<int:pk>", str(pk)).replace("<str:name>", str(pk))
    return "/api/v1/" + route.replace("<path:path>", "notes/a.md")


def test_every_route_is_listed_here():
    for name, route, _ in _routes():
        assert name in PUBLIC | WITHOUT_ID or "<int:pk>" in route or "<str:name>" in route, name


def test_another_users_objects_are_404_on_every_route_and_method(bob_api, alices_objects):
    checked = 0
    for name, route, methods in _routes():
        if name in PUBLIC | WITHOUT_ID:
            continue
        assert name in alices_objects, f"route {name!r} has no object in this test"
        for method in methods:
            response = getattr(bob_api, method)(
                _url(route, alices_objects[name]), {}, format="json"
            )
            assert response.status_code == 404, (method, route, response.status_code)
            assert response.json() == {"detail": response.json()["detail"]}
            checked += 1
    assert checked >= 15


def test_missing_objects_are_404_too(api, alices_objects):
    for name, route, methods in _routes():
        if name in PUBLIC | WITHOUT_ID:
            continue
        for method in methods:
            response = getattr(api, method)(_url(route, 987654321), {}, format="json")
            assert response.status_code == 404, (method, route)


def test_every_route_but_the_schema_needs_credentials(client, alices_objects):
    for name, route, methods in _routes():
        if name in PUBLIC:
            continue
        for method in methods:
            response = getattr(client, method)(
                _url(route, alices_objects.get(name, 1)), content_type="application/json"
            )
            assert response.status_code == 401, (method, route, response.status_code)
            assert "detail" in response.json()
            assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    ["Bearer nope", "Bearer rbk_" + "x" * 43, "Bearer", "Bearer a b", "Bearer ñ"],
)
def test_a_bad_key_is_401(client, session, header):
    response = client.get("/api/v1/sessions/", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert "detail" in response.json()


def test_a_revoked_key_is_401(api, alice):
    from accounts.models import ApiKey
    from accounts.services import apikey_revoke

    key = ApiKey.objects.get(user=alice, name="tests")
    apikey_revoke(user=alice, key_id=key.pk)
    assert api.get("/api/v1/sessions/").status_code == 401


def test_the_browser_session_works_with_csrf(client, alice):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    assert browser.get("/api/v1/sessions/").status_code == 200
    response = browser.post("/api/v1/sessions/", {"name": "x"}, content_type="application/json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_the_schema_and_docs_are_served_offline(client):
    schema = client.get("/api/v1/schema/")
    assert schema.status_code == 200
    assert b"openapi" in schema.content
    docs = client.get("/api/v1/docs/")
    assert docs.status_code == 200
    page = docs.content.decode()
    assert "swagger-ui" in page
    assert "cdn." not in page
    assert "unpkg" not in page


def test_the_schema_is_valid_openapi_without_warnings():
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")
