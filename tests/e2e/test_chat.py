"""The chat in a real browser: streaming, tool calls, checkpoints, branches, rewind, errors."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Error, Reply, ToolCall, ToolCalls

from .conftest import (
    FINISHED_ASSISTANT,
    assert_seen_streaming,
    chat,
    checkpoint,
    conversation,
    current_branch_id,
    keep_session,
    last_reply,
    message_texts,
    new_session,
    open_restore,
    record_stream,
    save_checkpoint,
    send_message,
    sign_up,
    wait_turn_done,
    wait_ws_open,
)

pytestmark = pytest.mark.e2e


def start(page, app) -> int:
    """A fresh user on a fresh session; returns the session id."""
    sign_up(page, app.base_url)
    return new_session(page)


def test_a_reply_streams_word_by_word(page, app, llm):
    sign_up(page, app.base_url)
    new_session(page)
    final = "Streaming works one word at a time here"
    llm.queue(Reply(final, delay=0.15))
    record_stream(page)

    before = send_message(page, "hello")
    bubble = page.locator("[data-streaming=true]")
    expect(bubble).to_be_visible()
    expect(bubble).to_have_attribute("id", re.compile(r"^turn-\d+$"))
    expect(bubble).to_have_attribute("data-role", "assistant")
    wait_turn_done(page, before)

    assert_seen_streaming(page, final)
    assert message_texts(page) == ["hello", final]
    expect(page.get_by_test_id("demo-label")).to_have_count(0)
    assert conversation(llm.messages(-1)) == [("user", "hello")]


def test_a_tool_call_shows_its_result_and_an_automatic_checkpoint(page, app, llm):
    start(page, app)
    llm.queue(
        ToolCalls([ToolCall("write_file", {"path": "answer.md", "content": "42"})]),
        Reply("It is 42, in answer.md."),
    )

    chat(page, "write 6*7 to answer.md")

    tool = page.locator("#messages [data-testid=message][data-role=tool]")
    expect(tool).to_have_count(1)
    details = tool.get_by_test_id("tool-call")
    expect(details).to_contain_text("Created answer.md")
    assert details.evaluate("d => d.tagName === 'DETAILS' && !d.open"), "not a collapsed <details>"
    assert last_reply(page) == "It is 42, in answer.md."
    auto = page.locator("[data-testid=checkpoint][data-kind=auto]")
    expect(auto).to_have_count(1)
    expect(auto.locator(".name")).to_have_text("after-write_file")
    # The model's second request carried the tool's result.
    assert any(
        m.get("role") == "tool" and "Created answer.md" in str(m.get("content"))
        for m in llm.messages(-1)
    )


def test_restoring_a_checkpoint_as_a_branch_continues_from_it(page, app, llm):
    start(page, app)
    chat(page, "first")
    save_checkpoint(page, "before-topic")
    main = current_branch_id(page)
    chat(page, "second")
    chat(page, "third")
    assert message_texts(page, "user") == ["first", "second", "third"]

    dialog = open_restore(page, "before-topic")
    expect(dialog.locator("[data-testid=restore-mode][data-mode=branch]")).to_be_checked()
    dialog.get_by_test_id("confirm-restore").click()
    expect(dialog).to_have_count(0)

    expect(page.locator("#messages [data-role=user]")).to_have_count(1)
    assert message_texts(page) == ["first", "Echo: first"]
    branches = page.get_by_test_id("branch")
    expect(branches).to_have_count(2)
    current = page.locator("[data-testid=branch].current")
    expect(current).to_have_count(1)
    expect(current).to_have_attribute("aria-current", "true")
    new = current.get_attribute("data-branch-id")
    assert new != main
    assert current_branch_id(page) == new

    chat(page, "fourth")
    assert conversation(llm.messages(-1)) == [
        ("user", "first"),
        ("assistant", "Echo: first"),
        ("user", "fourth"),
    ]
    assert message_texts(page, "user") == ["first", "fourth"]


def test_switching_branches_updates_every_tab(page, app, llm):
    start(page, app)
    chat(page, "one")
    save_checkpoint(page, "fork")
    chat(page, "two")
    main = current_branch_id(page)
    open_restore(page, "fork").get_by_test_id("confirm-restore").click()
    expect(page.get_by_test_id("branch")).to_have_count(2)
    fork = current_branch_id(page)
    assert fork != main
    assert message_texts(page, "user") == ["one"]

    # Back to the old branch: its messages come back.
    page.locator(f"[data-testid=branch][data-branch-id='{main}']").click()
    expect(page.get_by_test_id("current-branch")).to_have_attribute("data-branch-id", main)
    expect(page.locator(f"[data-testid=branch][data-branch-id='{main}']")).to_have_class(
        re.compile(r"\bcurrent\b")
    )
    assert message_texts(page, "user") == ["one", "two"]

    # A second tab on the same session shows the same branch...
    other = page.context.new_page()
    other.goto(page.url)
    wait_ws_open(other)
    expect(other.get_by_test_id("current-branch")).to_have_attribute("data-branch-id", main)
    other.evaluate("window.__sameDocument = true")

    # ...and follows a switch made in the first tab, without a reload.
    page.locator(f"[data-testid=branch][data-branch-id='{fork}']").click()
    expect(page.get_by_test_id("current-branch")).to_have_attribute("data-branch-id", fork)
    expect(other.get_by_test_id("current-branch")).to_have_attribute("data-branch-id", fork)
    expect(other.locator("#messages [data-role=user]")).to_have_count(1)
    assert message_texts(other, "user") == ["one"]
    assert other.evaluate("window.__sameDocument") is True


def test_rewind_deletes_what_came_after_the_checkpoint(page, app, llm):
    start(page, app)
    chat(page, "alpha")
    save_checkpoint(page, "cut-here")
    chat(page, "beta")
    save_checkpoint(page, "later-one")
    expect(page.get_by_test_id("checkpoint")).to_have_count(2)

    dialog = open_restore(page, "cut-here")
    dialog.locator("[data-testid=restore-mode][data-mode=rewind]").check()
    warning = dialog.get_by_test_id("rewind-warning")
    expect(warning).to_be_visible()
    expect(warning).to_contain_text("2 later messages")
    expect(warning).to_contain_text("1 later checkpoint")
    dialog.get_by_test_id("confirm-restore").click()
    expect(dialog).to_have_count(0)

    expect(page.locator("#messages [data-role=user]")).to_have_count(1)
    assert message_texts(page) == ["alpha", "Echo: alpha"]
    names = page.get_by_test_id("checkpoint").locator(".name")
    expect(names).to_have_text(["cut-here"])
    expect(page.get_by_test_id("branch")).to_have_count(1)


def test_blank_input_is_not_sent_and_model_html_is_made_harmless(page, app, llm):
    start(page, app)
    posts = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    box, send = page.get_by_test_id("message-input"), page.get_by_test_id("send")

    expect(send).to_be_disabled()
    box.fill("   \n  ")
    expect(send).to_be_disabled()
    box.press("Enter")
    box.fill("")
    box.press("Enter")
    page.wait_for_timeout(300)
    assert posts == []
    expect(page.locator("#messages [data-testid=message]")).to_have_count(0)
    assert llm.requests == []

    # Shift+Enter is a new line, not a send.
    box.fill("line one")
    expect(send).to_be_enabled()
    box.press("Shift+Enter")
    box.press_sequentially("line two")
    assert box.input_value() == "line one\nline two"
    page.wait_for_timeout(300)
    assert posts == []
    box.fill("")
    expect(send).to_be_disabled()

    llm.queue(
        Reply(
            'Look: <img src=x onerror="window.__pwned=1"> and '
            "[click](javascript:window.__pwned=1) and "
            "<script>window.__pwned=1</script> done.",
            chunk_size=3,
        )
    )
    chat(page, "show me some html")
    expect(page.locator(FINISHED_ASSISTANT).last).to_contain_text("done.")
    page.wait_for_timeout(200)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    expect(page.locator("#messages img")).to_have_count(0)
    expect(page.locator("#messages script")).to_have_count(0)
    hrefs = page.locator("#messages a").evaluate_all("links => links.map(a => a.href)")
    assert not [h for h in hrefs if h.strip().lower().startswith("javascript:")], hrefs


def test_a_failed_turn_can_be_retried(page, app, llm):
    start(page, app)
    llm.queue(Error(500, "the model is down"))

    chat(page, "will this work?")
    error = page.get_by_test_id("turn-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("500")
    expect(page.get_by_test_id("retry")).to_be_visible()
    assert message_texts(page) == ["will this work?"]

    llm.queue(Reply("Recovered now."))
    page.get_by_test_id("retry").click()
    expect(page.locator(FINISHED_ASSISTANT)).to_have_count(1, timeout=20_000)
    expect(page.get_by_test_id("turn-error")).to_have_count(0)
    expect(page.locator("[data-streaming=true]")).to_have_count(0)
    assert message_texts(page) == ["will this work?", "Recovered now."]
    assert conversation(llm.messages(-1)) == [("user", "will this work?")]


def test_restoring_a_checkpoint_deleted_in_another_tab_says_so(page, app, llm):
    start(page, app)
    chat(page, "keep this")
    save_checkpoint(page, "doomed")
    other = page.context.new_page()
    other.goto(page.url)
    wait_ws_open(other)

    dialog = open_restore(page, "doomed")
    other.once("dialog", lambda d: d.accept())
    checkpoint(other, "doomed").get_by_test_id("delete-checkpoint").click()
    expect(other.get_by_test_id("checkpoint")).to_have_count(0)
    expect(page.get_by_test_id("checkpoint")).to_have_count(0)  # the live update arrived

    # The open dialog survived the live update. The page fetches that update itself (one more
    # round trip than when the socket carried it): on a loaded machine the swap may still be
    # settling when the click comes, so the click may wait for it.
    expect(dialog).to_be_visible()
    dialog.get_by_test_id("confirm-restore").click(timeout=10_000)
    notice = page.get_by_test_id("notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text(re.compile(r"no longer exists|not found", re.I))
    expect(page.get_by_test_id("restore-dialog")).to_have_count(0)
    assert message_texts(page) == ["keep this", "Echo: keep this"]
    chat(page, "still here?")
    assert last_reply(page) == "Echo: still here?"


def test_restoring_a_checkpoint_deleted_while_this_tab_was_offline_says_so(page, app, llm):
    """The same race without the live update (this tab's WebSocket answers nothing, as after a
    network drop): the server refuses with a notice and the page keeps working."""
    start(page, app)
    chat(page, "keep this")
    save_checkpoint(page, "doomed")
    url = page.url
    page.route_web_socket(re.compile(r"/ws/"), lambda ws: None)  # connected to nothing
    page.goto(url)
    other = page.context.new_page()
    other.goto(url)
    wait_ws_open(other)

    dialog = open_restore(page, "doomed")
    other.once("dialog", lambda d: d.accept())
    checkpoint(other, "doomed").get_by_test_id("delete-checkpoint").click()
    expect(other.get_by_test_id("checkpoint")).to_have_count(0)

    dialog.get_by_test_id("confirm-restore").click()
    notice = page.get_by_test_id("notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text(re.compile(r"no longer exists|not found", re.I))
    expect(page.get_by_test_id("restore-dialog")).to_have_count(0)
    assert message_texts(page) == ["keep this", "Echo: keep this"]
    expect(page.get_by_test_id("branch")).to_have_count(1)
    expect(other.get_by_test_id("branch")).to_have_count(1)


def test_another_users_session_is_not_found(page, app, contexts, llm):
    start(page, app)
    chat(page, "private")
    url = page.url

    stranger = contexts.new().new_page()
    sign_up(stranger, app.base_url, prefix="stranger")
    response = stranger.goto(url)
    assert response is not None
    assert response.status == 404
    expect(stranger.locator("body")).not_to_contain_text("private")


def test_rename_and_delete_a_session_from_the_sidebar(page, app):
    keep_session(page, start(page, app))  # so that New session makes a second one
    page.get_by_test_id("new-session").click()
    page.wait_for_load_state()
    active = page.locator("[data-testid=session].active")
    active.get_by_test_id("rename-session").click()
    field = page.get_by_test_id("rename-input")
    expect(field).to_have_value("New session")
    field.fill("Renamed in the browser")
    field.press("Enter")
    expect(page.get_by_test_id("session-title")).to_have_text("Renamed in the browser")
    expect(active).to_contain_text("Renamed in the browser")
    expect(page.get_by_test_id("current-branch")).to_contain_text("main")
    page.once("dialog", lambda dialog: dialog.accept())
    active.get_by_test_id("delete-session").click()
    expect(page.get_by_test_id("flash")).to_contain_text("Deleted “Renamed in the browser”")
    expect(page.locator("[data-testid=session]")).to_have_count(1)
    expect(page.get_by_test_id("session-title")).not_to_have_text("Renamed in the browser")
