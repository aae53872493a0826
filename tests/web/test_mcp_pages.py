"""The MCP servers in the pages, through HTTP: the chat's Tools menu (on/off per session, one's
own credentials), the profile's MCP credentials, and the admin (who gets a server, the header
names users supply, the URL's secrets masked, header values never shown)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.urls import reverse

from agents.models import McpCredential, McpServer
from sessions_app.models import Session

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
TOKEN = "Bearer alice-page-token-81c0"  # noqa: S105 - a test's secret
QUERY_SECRET = "url-query-secret-2b7e"  # noqa: S105 - a test's secret
HEADER_SECRET = "operator-header-secret-4d1f"  # noqa: S105 - a test's secret


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def servers(alice):
    McpServer.objects.create(name="git", url="http://127.0.0.1:9/mcp", per_session=True)
    return McpServer.objects.create(
        name="tracker", url="http://127.0.0.1:9/mcp", user_headers=["Authorization"]
    )


def tools_url(session) -> str:
    return reverse("chat:session_tools", args=[session.pk])


def stored(user) -> list[dict]:
    return [c.headers for c in McpCredential.objects.filter(user=user)]


def test_the_header_offers_the_tools_menu_only_when_a_server_is_there(as_alice, session):
    page = reverse("chat:session", args=[session.pk])
    assert 'data-testid="open-tools"' not in as_alice.get(page).content.decode()
    McpServer.objects.create(name="git", url="http://127.0.0.1:9/mcp")
    assert 'data-testid="open-tools"' in as_alice.get(page).content.decode()


def test_the_tools_menu_turns_a_server_on_for_this_session(as_alice, session, servers):
    dialog = as_alice.get(tools_url(session), **HX).content.decode()
    assert 'data-server="git"' in dialog
    assert 'data-server="tracker"' in dialog
    assert "Needs your own credentials" in dialog

    answer = as_alice.post(tools_url(session), {"server": "git", "on": ["false", "true"]}, **HX)
    assert answer.status_code == 200
    session.refresh_from_db()
    assert session.settings["mcp_servers"] == {"git": True}
    assert "checked" in answer.content.decode().split('data-server="git"')[1].split("</li>")[0]

    as_alice.post(tools_url(session), {"server": "git", "on": "false"}, **HX)
    session.refresh_from_db()
    assert session.settings["mcp_servers"] == {"git": False}


def test_the_tools_menu_refuses_a_bad_choice_in_place(as_alice, session, servers):
    answer = as_alice.post(tools_url(session), {"server": "git", "on": "maybe"}, **HX)
    assert answer.status_code == 200
    assert "on: must be true or false" in answer.content.decode()
    assert (
        as_alice.post(tools_url(session), {"server": "nosuch", "on": "true"}, **HX).status_code
        == 404
    )
    session.refresh_from_db()
    assert "mcp_servers" not in session.settings


def test_bob_gets_a_404_for_alices_tools_menu_and_changes_nothing(client, bob, session, servers):
    client.force_login(bob)
    before = Session.objects.get(pk=session.pk).metadata
    assert client.get(tools_url(session), **HX).status_code == 404
    assert client.post(tools_url(session), {"server": "git", "on": "true"}, **HX).status_code == 404
    url = reverse("chat:session_tools_credentials", args=[session.pk, "tracker"])
    assert client.post(url, {"header:Authorization": TOKEN}, **HX).status_code == 404
    assert Session.objects.get(pk=session.pk).metadata == before
    assert McpCredential.objects.count() == 0


def test_credentials_from_the_tools_menu_are_saved_and_never_shown(
    as_alice, alice, session, servers
):
    url = reverse("chat:session_tools_credentials", args=[session.pk, "tracker"])
    answer = as_alice.post(url, {"header:Authorization": TOKEN}, **HX).content.decode()
    assert "Your credentials for tracker are saved" in answer
    assert "alice-page-token" not in answer
    assert stored(alice) == [{"Authorization": TOKEN}]
    # Refused in place, naming the header, and what was stored stays.
    answer = as_alice.post(url, {"header:Authorization": "x" * 5000}, **HX).content.decode()
    assert "headers.Authorization: at most 4,096 characters" in answer
    assert stored(alice) == [{"Authorization": TOKEN}]


def test_the_profile_sets_and_removes_credentials_never_showing_them(as_alice, alice, servers):
    profile = reverse("accounts:profile")
    page = as_alice.get(profile).content.decode()
    assert 'data-server="tracker"' in page
    assert 'data-server="git"' not in page  # it asks for nothing

    save = reverse("accounts:mcp_credentials", args=["tracker"])
    page = as_alice.post(save, {"header:Authorization": TOKEN}, follow=True).content.decode()
    assert "are saved; they are never shown again" in page
    assert "alice-page-token" not in page
    assert stored(alice) == [{"Authorization": TOKEN}]
    with connection.cursor() as cursor:
        cursor.execute("SELECT headers FROM agents_mcpcredential")
        [(raw,)] = cursor.fetchall()
    assert "alice-page-token" not in raw  # encrypted at rest

    page = as_alice.post(save, {"header:Other": "x"}, follow=True).content.decode()
    assert "headers.Other: not a header tracker asks for" in page
    assert stored(alice) == [{"Authorization": TOKEN}]

    remove = reverse("accounts:mcp_credentials_remove", args=["tracker"])
    as_alice.post(remove)
    assert stored(alice) == []


def test_the_admin_masks_the_urls_secrets_and_never_shows_a_header_value(admin_client, alice):
    server = McpServer.objects.create(
        name="tracker",
        url=f"https://mcp.example.com/mcp?key={QUERY_SECRET}",
        headers={"Authorization": f"Bearer {HEADER_SECRET}"},
    )
    listing = admin_client.get(reverse("admin:agents_mcpserver_changelist")).content.decode()
    assert "https://mcp.example.com/mcp?key=***" in listing
    change = reverse("admin:agents_mcpserver_change", args=[server.pk])
    form = admin_client.get(change).content.decode()
    for page in (listing, form):
        assert QUERY_SECRET not in page
        assert HEADER_SECRET not in page
    assert "Authorization: set" in form

    # Saved with the masked URL as shown: the stored URL stays; the access fields are saved.
    answer = admin_client.post(
        change,
        {
            "name": "tracker",
            "transport": "http",
            "url": "https://mcp.example.com/mcp?key=***",
            "enabled": "on",
            "approval_names": "",
            "new_headers": "",
            "users": [alice.pk],
            "groups": [],
            "per_session": "on",
            "user_header_names": "X-Api-Key\nAuthorization",
        },
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    server.refresh_from_db()
    assert server.url == f"https://mcp.example.com/mcp?key={QUERY_SECRET}"
    assert server.headers == {"Authorization": f"Bearer {HEADER_SECRET}"}
    assert server.for_everyone is False
    assert list(server.users.all()) == [alice]
    assert server.per_session is True
    assert server.user_headers == ["X-Api-Key", "Authorization"]

    # A new URL typed in replaces it.
    admin_client.post(
        change,
        {
            "name": "tracker",
            "transport": "http",
            "url": "https://other.example.com/mcp",
            "enabled": "on",
            "for_everyone": "on",
            "user_header_names": "",
        },
    )
    server.refresh_from_db()
    assert server.url == "https://other.example.com/mcp"
    assert server.for_everyone is True


def test_the_admin_refuses_a_bad_user_header_name(admin_client):
    server = McpServer.objects.create(name="tracker", url="https://mcp.example.com/mcp")
    change = reverse("admin:agents_mcpserver_change", args=[server.pk])
    answer = admin_client.post(
        change,
        {"name": "tracker", "url": "https://mcp.example.com/mcp", "user_header_names": "bad name"},
    )
    assert answer.status_code == 200
    assert "Not a header name" in answer.content.decode()
    server.refresh_from_db()
    assert server.user_headers == []
