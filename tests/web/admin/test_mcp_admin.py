"""The MCP servers in the admin: the headers are write-only secrets, never shown again."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import McpServer

pytestmark = pytest.mark.django_db

SECRET = "Bearer admin-secret-value-42"  # noqa: S105 - a test's secret, looked for in every page
ADD = reverse("admin:agents_mcpserver_add")
LIST = reverse("admin:agents_mcpserver_changelist")


def change_url(server: McpServer) -> str:
    return reverse("admin:agents_mcpserver_change", args=[server.pk])


@pytest.fixture
def admin_client_(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def server():
    return McpServer.objects.create(
        name="tracker",
        url="https://mcp.example.com/mcp",
        headers={"Authorization": SECRET},
        approval=["send_message"],
    )


def form(**overrides):
    data = {
        "name": "tracker",
        "transport": "http",
        "url": "https://mcp.example.com/mcp",
        "enabled": "on",
        "approval_names": "send_message",
        "new_headers": "",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def test_adding_a_server_stores_its_headers_and_approval_list(admin_client_):
    response = admin_client_.post(
        ADD,
        form(
            name="search",
            approval_names="drop_table, send_message\nsend_message",
            new_headers=f'{{"Authorization": "{SECRET}"}}',
        ),
    )

    assert response.status_code == 302
    server = McpServer.objects.get(name="search")
    assert server.headers == {"Authorization": SECRET}
    assert server.approval == ["drop_table", "send_message"]
    assert server.enabled is True


def test_no_admin_page_shows_a_saved_secret(admin_client_, server):
    pages = [
        LIST,
        change_url(server),
        reverse("admin:agents_mcpserver_history", args=[server.pk]),
        reverse("admin:agents_mcpserver_delete", args=[server.pk]),
        reverse("admin:index"),
        reverse("admin:app_list", args=["agents"]),
    ]
    for url in pages:
        response = admin_client_.get(url)
        assert response.status_code == 200, url
        assert "admin-secret-value-42" not in response.content.decode(), url
    # The header's name is shown, on the list and on the form.
    assert "Authorization" in admin_client_.get(LIST).content.decode()
    assert "Authorization" in admin_client_.get(change_url(server)).content.decode()


def test_a_blank_headers_field_keeps_the_stored_headers(admin_client_, server):
    response = admin_client_.post(change_url(server), form(url="https://other.example.com/mcp"))

    assert response.status_code == 302
    server.refresh_from_db()
    assert server.url == "https://other.example.com/mcp"
    assert server.headers == {"Authorization": SECRET}
    # Saving wrote no secret into the admin's own log either.
    history = admin_client_.get(reverse("admin:agents_mcpserver_history", args=[server.pk]))
    assert "admin-secret-value-42" not in history.content.decode()


def test_a_new_json_object_replaces_the_headers_and_an_empty_one_removes_them(
    admin_client_, server
):
    admin_client_.post(change_url(server), form(new_headers='{"X-Api-Key": "k2"}'))
    server.refresh_from_db()
    assert server.headers == {"X-Api-Key": "k2"}

    admin_client_.post(change_url(server), form(new_headers="{}"))
    server.refresh_from_db()
    assert server.headers == {}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("new_headers", "not json at all admin-secret-value-42"),
        ("new_headers", '["admin-secret-value-42"]'),
        ("new_headers", '{"Authorization": 42}'),
        ("new_headers", '{"Bad Name": "admin-secret-value-42"}'),
        ("name", "bad name!"),
        ("url", "ftp://example.com/x"),
        ("approval_names", "ok, not a name!"),
    ],
)
def test_bad_input_is_refused_writes_nothing_and_echoes_no_secret(
    admin_client_, server, field, value
):
    response = admin_client_.post(change_url(server), form(**{field: value}))

    assert response.status_code == 200  # the form again, with the error
    assert response.context["adminform"].form.errors
    assert "admin-secret-value-42" not in response.content.decode()
    server.refresh_from_db()
    assert server.name == "tracker"
    assert server.headers == {"Authorization": SECRET}
    assert server.approval == ["send_message"]


def test_a_form_with_an_error_does_not_send_back_the_headers_just_typed(admin_client_, server):
    response = admin_client_.post(
        change_url(server),
        form(url="not a url", new_headers='{"Authorization": "Bearer typed-secret-7"}'),
    )

    assert response.status_code == 200
    assert "typed-secret-7" not in response.content.decode()


def test_the_mcp_admin_is_for_staff_only(client, alice, server):
    client.force_login(alice)
    for url in (LIST, change_url(server), ADD):
        response = client.get(url)
        assert response.status_code == 302
        assert "/login/" in response["Location"]


def test_a_stdio_server_needs_a_command_and_an_http_one_a_url(admin_client_):
    stdio = admin_client_.post(ADD, form(name="local", transport="stdio", url=""))
    http = admin_client_.post(ADD, form(name="remote", transport="sse", url=""))

    assert stdio.status_code == 200
    assert "A stdio server needs its command" in stdio.content.decode()
    assert "An http or sse server needs its URL" in http.content.decode()
    assert not McpServer.objects.filter(name__in=["local", "remote"]).exists()


def test_a_stdio_server_is_stored_with_its_arguments_env_and_timeout(admin_client_):
    response = admin_client_.post(
        ADD,
        form(
            name="time",
            transport="stdio",
            url="",
            command="mcp-server-time",
            args_lines="--local-timezone\nUTC",
            new_env='{"TZ_SECRET": "env-secret-9"}',
            timeout="5",
            deny_names="convert_time",
        ),
    )

    assert response.status_code == 302
    row = McpServer.objects.get(name="time")
    assert (row.command, row.args, row.env, row.timeout) == (
        "mcp-server-time",
        ["--local-timezone", "UTC"],
        {"TZ_SECRET": "env-secret-9"},
        5.0,
    )
    assert row.deny == ["convert_time"]
    page = admin_client_.get(change_url(row)).content.decode()
    assert "TZ_SECRET" in page
    assert "env-secret-9" not in page


def test_an_approval_name_not_among_the_listed_tools_is_refused_with_the_list(
    admin_client_, server
):
    McpServer.objects.filter(pk=server.pk).update(
        catalogue=[
            {"name": "lookup", "inputSchema": {"type": "object"}},
            {"name": "send_message", "inputSchema": {"type": "object"}},
        ]
    )
    refused = admin_client_.post(change_url(server), form(approval_names="tracker__nope"))
    taken = admin_client_.post(change_url(server), form(approval_names="tracker__lookup"))

    assert refused.status_code == 200
    assert "tracker__nope, not among its tools (lookup, send_message)" in refused.content.decode()
    assert taken.status_code == 302
    server.refresh_from_db()
    assert server.approval == ["tracker__lookup"]


def test_the_change_page_shows_status_and_tools_with_their_annotations(admin_client_, server):
    McpServer.objects.filter(pk=server.pk).update(
        catalogue=[
            {
                "name": "send_message",
                "inputSchema": {"type": "object"},
                "annotations": {"destructiveHint": True},
            }
        ],
        last_error="it could not be reached",
    )
    page = admin_client_.get(change_url(server)).content.decode()

    assert "tracker__send_message" in page
    assert "destructive" in page
    assert "(needs approval)" in page
    assert "last error: it could not be reached" in page


def test_test_connection_lists_the_tools_on_a_worker_and_the_status_shows_it(
    admin_client_, settings
):
    settings.ROLLBACK_RUN_TURNS_INLINE = True
    row = McpServer.objects.create(name="gone", url="http://127.0.0.1:9/mcp", timeout=2)

    response = admin_client_.post(LIST, {"action": "test_connection", "_selected_action": [row.pk]})

    assert response.status_code == 302
    row.refresh_from_db()
    assert row.last_error == "it could not be reached"
    assert (
        "last error: it could not be reached" in admin_client_.get(change_url(row)).content.decode()
    )
