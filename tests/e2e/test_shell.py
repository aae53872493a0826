"""The sandboxed shell in Chromium: the model's run_shell call shows as a terminal block (the
command, its output as text, its exit code), the file it wrote appears in the Files panel at
once and opens from the block's link; a restore brings the files back as they were before it;
at phone width the block wraps inside the page. In the dark scheme at 1366 px, then at 390."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

from .conftest import TURN_TIMEOUT_MS, chat, new_session, send_message, sign_up, wait_turn_done

pytestmark = pytest.mark.e2e

WIDE, NARROW = {"width": 1366, "height": 900}, {"width": 390, "height": 844}
SCRIPT = "printf 'print(6*7)\\nprint(\"<b>bold</b>\")\\n' > main.py && python3 main.py"


def test_a_run_is_a_terminal_block_and_its_file_follows_in_the_files_panel(page, app, llm):
    page.set_viewport_size(WIDE)
    page.emulate_media(color_scheme="dark")
    sign_up(page, app.base_url)
    new_session(page)
    llm.queue(ToolCalls([ToolCall("run_shell", {"command": SCRIPT})]), Reply("It printed 42."))
    chat(page, "write a script and run it")

    terminal = page.get_by_test_id("terminal").last
    expect(terminal).to_be_visible(timeout=TURN_TIMEOUT_MS)
    expect(terminal.get_by_test_id("terminal-command")).to_have_text(f"$ {SCRIPT}")
    expect(terminal.locator("pre")).to_contain_text("42\n<b>bold</b>")
    expect(terminal.locator("pre b")).to_have_count(0)  # output is text, never markup
    expect(terminal.get_by_test_id("terminal-status")).to_contain_text("exit code 0")

    item = page.locator('[data-testid=file-item][data-path="main.py"]')
    expect(item).to_be_visible()
    terminal.get_by_test_id("terminal-file").click()
    expect(page.get_by_test_id("file-open")).to_have_attribute("data-path", "main.py")
    expect(page.get_by_test_id("file-content")).to_contain_text("print(6*7)")

    # A second run deletes it: the panel follows that too.
    llm.queue(ToolCalls([ToolCall("run_shell", {"command": "rm main.py"})]), Reply("Removed."))
    chat(page, "remove it")
    expect(item).to_have_count(0)
    expect(page.get_by_test_id("terminal").last.get_by_test_id("terminal-files")).to_contain_text(
        "main.py (deleted)"
    )

    page.set_viewport_size(NARROW)
    page.emulate_media(color_scheme="light")
    first = page.get_by_test_id("terminal").first
    first.scroll_into_view_if_needed()
    widths = page.evaluate(
        "() => ({page: document.documentElement.scrollWidth, window: window.innerWidth})"
    )
    assert widths["page"] <= widths["window"], widths


def test_a_runs_output_shows_live_while_it_runs(page, app, llm):
    page.set_viewport_size(WIDE)  # where the sidebar's New session shows
    page.emulate_media(color_scheme="dark")
    sign_up(page, app.base_url)
    new_session(page)
    page.set_viewport_size(NARROW)
    command = "echo 'step <1>'; sleep 4; echo 'step 2'"
    llm.queue(ToolCalls([ToolCall("run_shell", {"command": command})]), Reply("Two steps."))
    sent = send_message(page, "run the steps")

    live = page.get_by_test_id("terminal-live")
    expect(live).to_have_text("step <1>\n", timeout=TURN_TIMEOUT_MS)  # as text, never markup
    # Still running: the reply streams, the run has not answered yet.
    expect(page.locator("#messages [data-streaming=true]")).to_have_count(1)
    expect(page.get_by_test_id("terminal")).to_have_count(0)
    expect(live).to_have_text("step <1>\nstep 2\n", timeout=TURN_TIMEOUT_MS)

    wait_turn_done(page, sent)
    expect(live).to_have_count(0)  # the result's terminal block took its place
    expect(page.get_by_test_id("terminal").locator("pre")).to_contain_text("step <1>\nstep 2")
    widths = page.evaluate(
        "() => ({page: document.documentElement.scrollWidth, window: window.innerWidth})"
    )
    assert widths["page"] <= widths["window"], widths
