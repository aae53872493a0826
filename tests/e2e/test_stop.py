"""Stop and the composer while the agent answers, in Chromium: the Stop button and Esc stop a
slow reply (its text stays, marked stopped), and a draft typed meanwhile survives the reply's end
and is sent right after it. A Stop during an approval keeps the call that ran and says which did
not, with Regenerate (issue 36)."""

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
    wait_turn_done,
)

pytestmark = pytest.mark.e2e

LONG = " ".join(f"word{i}" for i in range(60))  # 60 chunks, 0.3 s apart: 18 s unless stopped


def start_slow_reply(page, app, llm) -> None:
    sign_up(page, app.base_url)
    new_session(page)
    llm.queue(Reply(LONG, delay=0.3))
    send_message(page, "tell me a long story")
    expect(page.locator("#messages [data-streaming=true] .body")).to_contain_text("word2")
    expect(page.get_by_test_id("send")).to_be_disabled()


def assert_stopped(page, llm) -> None:
    # At once in its final form: no streaming bubble, the stored message with its badge.
    expect(page.get_by_test_id("stopped-badge")).to_have_count(1)
    expect(page.locator("#messages [data-streaming=true]")).to_have_count(0)
    shown = page.locator("#messages [data-role=assistant] .body").inner_text().strip()
    assert shown
    assert LONG.startswith(shown)
    assert shown != LONG
    expect(page.get_by_test_id("stop")).to_have_count(0)
    # The model's stream was closed: its server saw the client go away.
    for _ in range(100):  # up to 10 s
        if llm.abandoned:
            break
        page.wait_for_timeout(100)
    assert llm.abandoned == 1
    # The stopped reply is stored, marked stopped, and shown after a reload.
    page.reload()
    texts = message_texts(page, "assistant")
    assert len(texts) == 1
    assert LONG.startswith(texts[0])
    assert texts[0] != LONG
    expect(page.get_by_test_id("stopped-badge")).to_have_count(1)


def test_the_stop_button_stops_a_slow_reply_and_keeps_what_was_shown(page, app, llm):
    start_slow_reply(page, app, llm)
    page.get_by_test_id("stop").click()
    assert_stopped(page, llm)


def test_esc_stops_a_slow_reply(page, app, llm):
    start_slow_reply(page, app, llm)
    page.get_by_test_id("message-input").press("Escape")
    assert_stopped(page, llm)


def test_a_draft_typed_during_the_reply_survives_and_is_sent_right_after(page, app, llm):
    sign_up(page, app.base_url)
    new_session(page)
    llm.queue(Reply("one two three four five six seven eight", delay=0.3), Reply("Second."))
    before = send_message(page, "first")
    expect(page.get_by_test_id("stop")).to_be_visible()
    box, send = page.get_by_test_id("message-input"), page.get_by_test_id("send")
    expect(box).to_be_enabled()
    box.press_sequentially("my next question")
    expect(send).to_be_disabled()
    box.press("Enter")  # while the agent answers, Enter keeps the draft
    assert box.input_value() == "my next question"

    wait_turn_done(page, before, timeout=TURN_TIMEOUT_MS)
    assert box.input_value() == "my next question"
    expect(send).to_be_enabled()
    expect(page.get_by_test_id("stop")).to_have_count(0)
    with page.expect_response(lambda r: r.url.endswith("/send/")) as answer:
        send.click()
    assert answer.value.status == 200
    expect(page.locator("#messages [data-role=user]")).to_have_count(2)
    wait_turn_done(page, {"users": 1, "assistants": 1})
    assert message_texts(page) == [
        "first",
        "one two three four five six seven eight",
        "my next question",
        "Second.",
    ]


@pytest.fixture(scope="module")
def tools_app(model_server, tmp_path_factory) -> Iterator[Services]:
    """The app served with a plain custom tool and one that needs approval (AGENT_TOOLS)."""
    env = app_env(
        tmp_path_factory.mktemp("stop-tools-var"),
        model_server.base_url,
        AGENT_TOOLS="tests.agents.custom_tools.send_message,tests.agents.approval_tools.send_email",
        AGENT_APPROVAL_SECONDS="60",
    )
    services = Services(tmp_path_factory.mktemp("stop-tools-logs"))
    try:
        services.prepare(env)
        services.start_daphne(env)
        yield services
    finally:
        services.stop_all()


def test_a_stop_during_an_approval_says_what_ran_and_what_did_not_and_regenerates(
    page, tools_app, llm
):
    sign_up(page, tools_app.base_url)
    new_session(page)
    llm.queue(
        ToolCalls(
            [
                ToolCall("send_message", {"to": "bob", "text": "hi"}, id="call_a"),
                ToolCall("send_email", {"to": "bob@example.com", "subject": "hi"}, id="call_b"),
            ]
        )
    )
    send_message(page, "message bob, then email him")
    expect(page.get_by_test_id("approval")).to_be_visible(timeout=TURN_TIMEOUT_MS)
    page.get_by_test_id("stop").click()

    line = page.get_by_test_id("stopped-line")
    expect(line).to_have_text(
        "Stopped: send_message ran; send_email did not", timeout=TURN_TIMEOUT_MS
    )
    expect(page.get_by_test_id("approval")).to_have_count(0)
    expect(page.get_by_test_id("tool-call")).to_have_count(1)
    page.reload()  # stored so
    expect(line).to_have_text("Stopped: send_message ran; send_email did not")
    expect(page.get_by_test_id("tool-call")).to_contain_text("send_message")

    llm.queue(Reply("Here it is again."))
    stopped = page.locator(FINISHED_ASSISTANT).filter(has=line)
    stopped.hover()  # a message's actions show on hover
    stopped.get_by_test_id("regenerate").click()
    reply = page.locator(f"{FINISHED_ASSISTANT} .body").last
    expect(reply).to_contain_text("Here it is again.", timeout=TURN_TIMEOUT_MS)
    expect(page.get_by_test_id("stopped-line")).to_have_count(0)
