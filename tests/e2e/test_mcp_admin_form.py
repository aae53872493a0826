"""The MCP server's admin form in Chromium: only the chosen transport's fields show (streamable
HTTP and SSE: the URL and headers; stdio: the command, its arguments and environment), switching
as the transport changes, in both themes."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import sign_in_as_staff

pytestmark = pytest.mark.e2e


@pytest.fixture
def no_servers_left(app, app_settings):
    """The servers this test saves are removed after it: the served app is shared by the browser
    tests that follow, and a server that cannot start would be offered to every turn of theirs
    (CI saw a later test's turns wait on it, with its notices on their replies)."""
    yield
    app.manage(
        app_settings,
        "shell",
        "-c",
        "from agents.models import McpServer; "
        "McpServer.objects.filter(name__startswith='local-').delete()",
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_form_shows_the_fields_of_the_chosen_transport(
    page, app, app_settings, scheme, no_servers_left
):
    page.set_viewport_size({"width": 1366, "height": 900})
    page.emulate_media(color_scheme=scheme)
    sign_in_as_staff(page, app, app_settings)
    page.goto(f"{app.base_url}/admin/agents/mcpserver/add/")
    url, command = page.locator("#id_url"), page.locator("#id_command")
    transport = page.locator("#id_transport")

    assert transport.input_value() == "http"
    expect(url).to_be_visible()
    expect(command).to_be_hidden()
    transport.select_option("stdio")
    expect(command).to_be_visible()
    expect(page.locator("#id_args_lines")).to_be_visible()
    expect(url).to_be_hidden()
    transport.select_option("sse")
    expect(url).to_be_visible()
    expect(command).to_be_hidden()

    # Saved as stdio, the form opens again on the stdio fields.
    transport.select_option("stdio")
    page.locator("#id_name").fill(f"local-{scheme}")
    command.fill("/usr/bin/true")
    page.locator("input[name=_continue]").click()
    expect(page.locator(".messagelist .success")).to_be_visible()
    expect(command).to_be_visible()
    expect(url).to_be_hidden()


def test_the_servers_list_shows_every_column_at_1366_px(page, app, app_settings, no_servers_left):
    rows = ", ".join(
        f"McpServer(name='local-srv-{i}', per_session=True, "
        f"url='https://mcp.example.com/a/very/long/path/to/the/server/endpoint/{i}')"
        for i in range(6)
    )
    app.manage(
        app_settings,
        "shell",
        "-c",
        f"from agents.models import McpServer; McpServer.objects.bulk_create([{rows}])",
    )
    page.set_viewport_size({"width": 1366, "height": 800})
    sign_in_as_staff(page, app, app_settings)
    page.goto(f"{app.base_url}/admin/agents/mcpserver/")
    table = page.locator("#result_list")
    expect(table.locator("th.column-updated_at")).to_be_visible()
    # No column is pushed past the list's box (where it would scroll out of view).
    right, room = table.evaluate(
        "(t) => [t.getBoundingClientRect().right, t.parentElement.getBoundingClientRect().right]"
    )
    widths = table.evaluate(
        "(t) => [...t.querySelectorAll('thead th')]"
        ".map(th => [th.className, Math.round(th.getBoundingClientRect().width)])"
    )
    assert right <= room + 1, str(widths)
