"""A tool call that waits for approval, in Chromium: every open tab shows the call with Approve
and Refuse; an answer in one tab takes the card away in the others and the turn goes on; Stop
still works during the wait."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

from .conftest import (
    FINISHED_ASSISTANT,
    TURN_TIMEOUT_MS,
    Services,
    app_env,
    message_texts,
    new_session,
    send_message,
    sign_up,
    wait_ws_open,
)
from .test_accessibility import violations

pytestmark = pytest.mark.e2e

EMAIL = {"to": "<b>bob</b>@example.com", "subject": "hello"}


@pytest.fixture(scope="module")
def approval_app(model_server, tmp_path_factory) -> Iterator[Services]:
    """The app served with a custom tool that needs approval (AGENT_TOOLS)."""
    env = app_env(
        tmp_path_factory.mktemp("approval-var"),
        model_server.base_url,
        AGENT_TOOLS="tests.agents.approval_tools.send_email",
        AGENT_APPROVAL_SECONDS="60",
    )
    services = Services(tmp_path_factory.mktemp("approval-logs"))
    try:
        services.prepare(env)
        services.start_daphne(env)
        yield services
    finally:
        services.stop_all()


def two_tabs(contexts, app: Services):
    first = contexts.new().new_page()
    sign_up(first, app.base_url)
    session = new_session(first)
    second = first.context.new_page()
    second.goto(f"{app.base_url}/chat/{session}/")
    wait_ws_open(second)
    return first, second


def test_every_tab_shows_the_call_and_an_approval_in_one_lets_the_turn_finish(
    contexts, approval_app, llm
):
    first, second = two_tabs(contexts, approval_app)
    llm.queue(ToolCalls([ToolCall("send_email", EMAIL, id="call_mail")]), Reply("Mail sent."))
    send_message(first, "mail bob")
    for tab in (first, second):
        card = tab.get_by_test_id("approval")
        expect(card).to_be_visible(timeout=TURN_TIMEOUT_MS)
        expect(tab.get_by_test_id("approval-tool")).to_have_text("send_email")
        # The model's arguments are text, never markup.
        expect(tab.get_by_test_id("approval-args")).to_contain_text("<b>bob</b>@example.com")
        expect(tab.locator("[data-testid=approval-args] b")).to_have_count(0)
        expect(tab.get_by_test_id("stop")).to_be_visible()
    second.get_by_test_id("approve").click()
    for tab in (first, second):
        # The card goes when the answer's event reaches each tab (a loaded machine is slow).
        expect(tab.get_by_test_id("approval")).to_have_count(0, timeout=TURN_TIMEOUT_MS)
        # The finished reply (not the streaming one, which the page replaces once the turn ends).
        reply = tab.locator(f"{FINISHED_ASSISTANT} .body").last
        expect(reply).to_contain_text("Mail sent.", timeout=TURN_TIMEOUT_MS)
    assert "Mail sent." in message_texts(first, "assistant")[-1]


def test_stop_during_the_wait_ends_the_turn_and_the_card_goes(contexts, approval_app, llm):
    first, second = two_tabs(contexts, approval_app)
    llm.queue(ToolCalls([ToolCall("send_email", EMAIL, id="call_mail")]), Reply("never"))
    send_message(first, "mail bob")
    expect(first.get_by_test_id("approval")).to_be_visible(timeout=TURN_TIMEOUT_MS)
    expect(second.get_by_test_id("approval")).to_be_visible(timeout=TURN_TIMEOUT_MS)
    first.get_by_test_id("stop").click()
    for tab in (first, second):
        expect(tab.get_by_test_id("approval")).to_have_count(0, timeout=TURN_TIMEOUT_MS)
        expect(tab.get_by_test_id("stop")).to_have_count(0, timeout=TURN_TIMEOUT_MS)
    llm.reset()  # the model was not asked again: "never" stays unused


@pytest.mark.parametrize(("width", "scheme"), [(1366, "light"), (390, "dark")])
def test_a_refused_call_says_it_was_not_run_not_that_it_failed(
    contexts, approval_app, llm, width, scheme
):
    """Issue 39: a call the user refused showed "(failed)"."""
    page = contexts.new(viewport={"width": width, "height": 844}).new_page()
    page.emulate_media(color_scheme=scheme)
    sign_up(page, approval_app.base_url)
    if width < 700:
        page.get_by_test_id("toggle-sidebar").click()
    new_session(page)
    llm.queue(ToolCalls([ToolCall("send_email", EMAIL, id="call_mail")]), Reply("Not sent."))
    send_message(page, "mail bob")
    expect(page.get_by_test_id("approval")).to_be_visible(timeout=TURN_TIMEOUT_MS)
    page.get_by_test_id("refuse").click()
    reply = page.locator(f"{FINISHED_ASSISTANT} .body").last
    expect(reply).to_contain_text("Not sent.", timeout=TURN_TIMEOUT_MS)
    call = page.get_by_test_id("tool-call").locator("summary")
    expect(call).to_contain_text("tool: send_email (not run)")
    assert "(failed)" not in page.locator("#messages").inner_text()
    assert violations(page) == []
