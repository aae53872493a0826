"""GET /api/v1/mcp/servers/ (the servers you may use) and PUT/DELETE
/api/v1/mcp/servers/{name}/credentials/ (your own credentials for one, write-only): scoped to
the user (a server they may not use is a 404), bad input refused with the field named and
nothing stored changed, values never in an answer, stored encrypted."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from agents.models import McpCredential, McpServer

pytestmark = pytest.mark.django_db

TOKEN = "Bearer alice-personal-token-93ae"  # noqa: S105 - a test's secret
SERVERS = "/api/v1/mcp/servers/"


def credentials_url(name: str) -> str:
    return f"{SERVERS}{name}/credentials/"


@pytest.fixture
def servers(alice):
    McpServer.objects.create(
        name="open",
        url="http://127.0.0.1:9/mcp?key=operator-query-secret",
        headers={"X-Team": "operator-header-secret"},
    )
    tracker = McpServer.objects.create(
        name="tracker", url="http://127.0.0.1:9/mcp", user_headers=["Authorization"]
    )
    only_alice = McpServer.objects.create(
        name="alices", url="http://127.0.0.1:9/mcp", for_everyone=False, per_session=True
    )
    only_alice.users.add(alice)
    McpServer.objects.create(name="off", url="http://127.0.0.1:9/mcp", enabled=False)
    return tracker


def put(client, name: str, body: object, **extra):
    return client.put(
        credentials_url(name), data=json.dumps(body), content_type="application/json", **extra
    )


def stored(user) -> list[dict]:
    return [c.headers for c in McpCredential.objects.filter(user=user)]


def test_the_list_holds_the_servers_you_may_use_without_urls_or_headers(api, bob_api, servers):
    # As the catalogue cache keeps them (agents.mcp.catalogue): one listed, one that failed.
    McpServer.objects.filter(name="open").update(
        catalogue=[
            {"name": "lookup", "inputSchema": {}},
            {"name": "send_message", "inputSchema": {}},
        ]
    )
    McpServer.objects.filter(name="tracker").update(last_error="it answered HTTP 401")
    answer = api.get(SERVERS)
    assert answer.status_code == 200
    body = answer.json()
    assert body["count"] == 3
    by_name = {s["name"]: s for s in body["results"]}
    assert list(by_name) == ["alices", "open", "tracker"]
    assert by_name["open"]["tools"] == ["lookup", "send_message"]
    assert by_name["open"]["status"] == "available"
    assert by_name["open"]["needs_credentials"] is False
    assert by_name["tracker"]["status"] == "unavailable"
    assert by_name["tracker"]["needs_credentials"] is True
    assert by_name["tracker"]["asks_for"] == ["Authorization"]
    assert by_name["alices"]["status"] == "unknown"
    assert by_name["alices"]["per_session"] is True
    text = answer.content.decode()
    assert "operator-query-secret" not in text
    assert "operator-header-secret" not in text
    assert "127.0.0.1" not in text
    # Bob does not see the server chosen for alice only.
    assert [s["name"] for s in bob_api.get(SERVERS).json()["results"]] == ["open", "tracker"]
    # Paginated like every list.
    page = api.get(SERVERS, {"limit": 1, "offset": 1}).json()
    assert [s["name"] for s in page["results"]] == ["open"]
    assert page["next"] is not None


def test_credentials_are_set_write_only_stored_encrypted_and_removed(api, alice, servers):
    answer = put(api, "tracker", {"headers": {"Authorization": TOKEN}})
    assert answer.status_code == 200
    assert answer.json()["needs_credentials"] is False
    assert answer.json()["credentials_set"] is True
    assert "alice-personal-token" not in answer.content.decode()
    assert stored(alice) == [{"Authorization": TOKEN}]
    row = McpCredential.objects.get(user=alice)
    with connection.cursor() as cursor:
        cursor.execute("SELECT headers FROM agents_mcpcredential WHERE id = %s", [row.pk])
        raw = cursor.fetchone()[0]
    assert "alice-personal-token" not in raw
    listed = api.get(SERVERS).content.decode()
    assert "alice-personal-token" not in listed

    assert api.delete(credentials_url("tracker")).status_code == 204
    assert stored(alice) == []
    tracker = next(s for s in api.get(SERVERS).json()["results"] if s["name"] == "tracker")
    assert tracker["needs_credentials"] is True


def test_a_server_you_may_not_use_is_a_404_and_nothing_is_stored(bob_api, bob, servers):
    for name in ("alices", "off", "nosuch", "x" * 300):
        assert put(bob_api, name, {"headers": {"Authorization": TOKEN}}).status_code == 404
        assert bob_api.delete(credentials_url(name)).status_code == 404
    assert stored(bob) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"headers": {"X-Other": "value-1234"}}, "headers.X-Other"),
        ({"headers": {"Authorization": "x" * 5000}}, "headers.Authorization"),
        ({"headers": {"Authorization": 12345}}, "headers.Authorization"),
        ({"headers": {"Authorization": ["a"]}}, "headers.Authorization"),
        ({"headers": {"Authorization": "two\nlines"}}, "headers.Authorization"),
        ({"headers": {"Authorization": "  "}}, "headers.Authorization"),
        ({"headers": {}}, "headers.Authorization"),
        ({"headers": "Bearer abc"}, "headers"),
        ({"headers": ["Authorization"]}, "headers"),
        ({}, "headers"),
        ({"headers": {"Authorization": TOKEN}, "extra": 1}, "extra"),
        (["headers"], ""),
    ],
)
def test_bad_credentials_are_refused_naming_the_field_and_nothing_changes(
    api, alice, servers, body, field
):
    put(api, "tracker", {"headers": {"Authorization": TOKEN}})
    answer = put(api, "tracker", body)
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["detail"]
    assert "alice-personal-token" not in answer.content.decode()
    assert stored(alice) == [{"Authorization": TOKEN}]


def test_a_body_that_is_not_json_is_a_400_and_nothing_changes(api, alice, servers):
    put(api, "tracker", {"headers": {"Authorization": TOKEN}})
    answer = api.put(credentials_url("tracker"), data="{not json", content_type="application/json")
    assert answer.status_code == 400
    assert stored(alice) == [{"Authorization": TOKEN}]


def test_a_server_that_asks_for_nothing_takes_no_credentials(api, alice, servers):
    answer = put(api, "open", {"headers": {"Authorization": TOKEN}})
    assert answer.status_code == 400
    assert "asks for no credentials" in answer.json()["detail"]
    assert stored(alice) == []


def test_the_list_and_credentials_need_a_signed_in_user(client, servers):
    assert client.get(SERVERS).status_code in (401, 403)
    assert put(client, "tracker", {"headers": {"Authorization": TOKEN}}).status_code in (401, 403)


def test_a_sessions_choice_of_servers_is_checked_when_patched(api, alice, servers):
    from agents.mcp.access import servers_for
    from sessions_app.models import Session
    from sessions_app.services import session_create

    session = session_create(owner=alice, name="s")
    url = f"/api/v1/sessions/{session.pk}/"
    for bad in ("alices", ["alices"], {"alices": "yes"}, {"x" * 41: True}):
        answer = api.patch(url, {"metadata": {"settings": {"mcp_servers": bad}}}, format="json")
        assert answer.status_code == 400, bad
        assert "settings.mcp_servers" in answer.json()["detail"]
    assert "mcp_servers" not in Session.objects.get(pk=session.pk).settings

    answer = api.patch(
        url, {"metadata": {"settings": {"mcp_servers": {"alices": True}}}}, format="json"
    )
    assert answer.status_code == 200
    chosen = servers_for(alice, Session.objects.get(pk=session.pk)).servers
    assert "alices" in [s.name for s in chosen]
