"""The chat's Tools menu, in Chromium: a server chosen per session, asking for each user's own
token, is not offered until the user gives the token and turns it on for the session in the
menu; then the next turn offers its tools, and a call reaches the real MCP server (tests.fakes.
mcp_server, which refuses any request without that token) with the user's token. The token is
never shown back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.fakes.mcp_server import FakeMcpServer

from .conftest import (
    FINISHED_ASSISTANT,
    TURN_TIMEOUT_MS,
    Services,
    app_env,
    chat,
    new_session,
    sign_up,
    wait_ws_open,
)
from .test_accessibility import violations

pytestmark = pytest.mark.e2e

TOKEN = "browser-user-token-7a2c41"  # noqa: S105 - a test's secret


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[FakeMcpServer]:
    with FakeMcpServer(token=TOKEN).start() as server:
        yield server


@pytest.fixture(scope="module")
def tools_env(model_server, tmp_path_factory) -> dict[str, str]:
    return app_env(tmp_path_factory.mktemp("tools-var"), model_server.base_url)


@pytest.fixture(scope="module")
def tools_app(tools_env, mcp_server, tmp_path_factory) -> Iterator[Services]:
    """The app served with one MCP server: chosen per session, each user's own token."""
    env = tools_env
    services = Services(tmp_path_factory.mktemp("tools-logs"))
    try:
        services.prepare(env)
        services.manage(
            env,
            "shell",
            "-c",
            "from agents.models import McpServer; McpServer.objects.create(name='tracker', "
            f"url={mcp_server.url!r}, per_session=True, user_headers=['Authorization'])",
        )
        services.start_daphne(env)
        yield services
    finally:
        services.stop_all()


def offered(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])}


def turn_requests(llm) -> list[dict]:
    """The model requests of turns (those that offer tools), not the titles'."""
    return [r for r in llm.requests if r.get("tools")]


def test_the_tools_menu_turns_a_server_on_and_the_next_turn_uses_it(
    contexts, tools_app, llm, mcp_server
):
    mcp_server.reset()
    page = contexts.new().new_page()
    sign_up(page, tools_app.base_url)
    new_session(page)
    wait_ws_open(page)

    # Off in a new session: the first turn is not offered its tools.
    llm.queue(Reply("Nothing to look up with."))
    chat(page, "hello")
    assert not any(n.startswith("tracker__") for n in offered(turn_requests(llm)[-1]))

    page.get_by_test_id("open-tools").click()
    dialog = page.get_by_test_id("session-tools-dialog")
    expect(dialog).to_be_visible()
    server = dialog.locator("[data-testid=tools-server][data-server=tracker]")
    expect(server.get_by_test_id("tools-credentials-state")).to_contain_text(
        "Needs your own credentials"
    )
    assert violations(page) == []  # the menu, open, as axe reads it
    server.get_by_test_id("tools-credential").fill(f"Bearer {TOKEN}")
    server.get_by_test_id("tools-credentials-save").click()
    expect(page.get_by_test_id("tools-saved")).to_be_visible()
    server = page.locator("[data-testid=tools-server][data-server=tracker]")
    expect(server.get_by_test_id("tools-credentials-state")).to_contain_text(
        "Your credentials are set"
    )
    assert TOKEN not in page.content()  # never rendered back

    toggle = server.get_by_test_id("tools-toggle")
    expect(toggle).not_to_be_checked()
    # The menu comes back from the change (htmx): wait for it before the next click.
    with page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/tools/")):
        toggle.check()
    shown = page.locator("[data-testid=tools-server][data-server=tracker]")
    expect(shown.get_by_test_id("tools-toggle")).to_be_checked()
    page.get_by_test_id("tools-close").click()
    expect(page.get_by_test_id("session-tools-dialog")).to_have_count(0)

    llm.queue(
        ToolCalls([ToolCall("tracker__lookup", {"query": "rollback"})]),
        Reply("Looked it up."),
    )
    chat(page, "look up rollback")
    reply = page.locator(f"{FINISHED_ASSISTANT} .body").last
    expect(reply).to_contain_text("Looked it up.", timeout=TURN_TIMEOUT_MS)
    assert "tracker__lookup" in offered(turn_requests(llm)[-2])
    assert mcp_server.calls == [("lookup", {"query": "rollback"})]
    assert f"Bearer {TOKEN}" in mcp_server.seen_authorization

    # The profile says the credentials are set, never what they are.
    page.goto(f"{tools_app.base_url}/accounts/profile/")
    section = page.locator("[data-testid=mcp-credentials][data-server=tracker]")
    expect(section.get_by_test_id("mcp-credentials-state")).to_have_text("set")
    assert TOKEN not in page.content()
    assert violations(page) == []


LONG_NAMES = [f"server-{i:02d}-" + "x" * 28 for i in range(12)]


@pytest.fixture
def many_servers(tools_app, tools_env):
    """Twelve servers of 40-character names, each chosen per session (so no turn contacts them),
    removed after the test: the served app is shared by this module's tests."""
    rows = ", ".join(
        f"McpServer(name={n!r}, url='http://127.0.0.1:9/mcp', per_session=True)" for n in LONG_NAMES
    )
    tools_app.manage(
        tools_env,
        "shell",
        "-c",
        f"from agents.models import McpServer; McpServer.objects.bulk_create([{rows}])",
    )
    yield
    tools_app.manage(
        tools_env,
        "shell",
        "-c",
        "from agents.models import McpServer; "
        "McpServer.objects.filter(name__startswith='server-').delete()",
    )


@pytest.mark.parametrize("size", [(1366, 800), (390, 844)], ids=["1366", "390"])
def test_a_long_list_of_servers_is_read_whole_in_the_tools_menu(
    contexts, tools_app, many_servers, size
):
    width, height = size
    page = contexts.new(viewport={"width": width, "height": height}).new_page()
    sign_up(page, tools_app.base_url)
    if width < 700:
        page.get_by_test_id("toggle-sidebar").click()  # the sessions drawer
    new_session(page)
    if width < 700:
        page.get_by_test_id("header-more").click()
    page.get_by_test_id("open-tools").click()
    dialog = page.get_by_test_id("session-tools-dialog")
    expect(dialog).to_be_visible()
    box = dialog.bounding_box()
    assert box["y"] >= 0
    assert box["y"] + box["height"] <= height  # within the screen, scrolling inside
    for name in LONG_NAMES:
        server = dialog.locator(f"[data-testid=tools-server][data-server={name}]")
        server.scroll_into_view_if_needed()
        label = server.locator("strong")
        expect(label).to_have_text(name)
        inside = label.evaluate(
            """(el) => { const d = el.closest("dialog").getBoundingClientRect();
                const b = el.getBoundingClientRect();
                return b.left >= d.left && b.right <= d.right && b.width > 0; }"""
        )
        assert inside, name  # not cut at the dialog's edge
