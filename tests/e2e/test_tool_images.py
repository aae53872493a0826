"""An MCP tool that answers with a picture, in Chromium: the picture shows inside the tool
message's card as the turn ends, loaded from the owner-only image view, and again after a
reload; the resources' lines are in the card's result."""

from __future__ import annotations

import json
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
    new_session,
    send_message,
    sign_up,
)

pytestmark = pytest.mark.e2e

TOKEN = "e2e-camera-token"  # noqa: S105 - a test server's token


@pytest.fixture(scope="module")
def camera_app(model_server, tmp_path_factory) -> Iterator[Services]:
    """The app served with one MCP server, `camera` (tests.fakes.mcp_server)."""
    with FakeMcpServer(token=TOKEN).start() as camera:
        servers = [
            {"name": "camera", "url": camera.url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
        ]
        env = app_env(
            tmp_path_factory.mktemp("camera-var"),
            model_server.base_url,
            AGENT_MCP_SERVERS=json.dumps(servers),
        )
        services = Services(tmp_path_factory.mktemp("camera-logs"))
        try:
            services.prepare(env)
            services.start_daphne(env)
            yield services
        finally:
            services.stop_all()


def shown_image(page) -> None:
    image = page.locator("[data-role=tool] [data-testid=tool-image]")
    expect(image).to_have_count(1, timeout=TURN_TIMEOUT_MS)
    expect(image).to_be_visible()
    # Loaded (not a broken image): the view served the PNG's 8 x 8 pixels.
    page.wait_for_function(
        "() => { const i = document.querySelector('[data-testid=tool-image]');"
        " return i && i.complete && i.naturalWidth === 8; }",
        timeout=TURN_TIMEOUT_MS,
    )


def test_the_picture_shows_in_the_tool_card_live_and_after_a_reload(contexts, camera_app, llm):
    page = contexts.new().new_page()
    sign_up(page, camera_app.base_url)
    new_session(page)
    llm.queue(ToolCalls([ToolCall("camera__snapshot", {})]), Reply("A red square."))

    send_message(page, "show me the snapshot")

    reply = page.locator(f"{FINISHED_ASSISTANT} .body").last
    expect(reply).to_contain_text("A red square.", timeout=TURN_TIMEOUT_MS)
    shown_image(page)
    card = page.locator("[data-role=tool]")
    expect(card).to_contain_text("[resource file:///notes.txt (text/plain)]")
    expect(card).to_contain_text("Meeting at noon")
    page.reload()
    shown_image(page)
