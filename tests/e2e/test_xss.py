"""The XSS corpus (tests/security/xss_corpus.py) in a real Chromium: a chat page filled with
payloads, live over its socket and after a reload, runs none of them."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply
from tests.security.xss_corpus import NAMES, PAYLOADS, marker

from .conftest import FINISHED_ASSISTANT, new_session, sign_up

pytestmark = pytest.mark.e2e

# Anything in the live document that could run script, after htmx has swapped everything in.
ACTIVE_IN_DOM = r"""() => {
    const found = [];
    const urls = ["href", "src", "action", "formaction", "xlink:href", "data", "srcdoc"];
    for (const el of document.querySelectorAll("*")) {
        const tag = el.tagName.toLowerCase();
        if (["iframe", "object", "embed", "base", "frame"].includes(tag)) found.push(tag);
        if (tag === "script" && !el.getAttribute("src")) found.push("inline script");
        for (const a of el.attributes) {
            if (a.name.startsWith("on")) {
                found.push(`${tag} ${a.name}=${a.value}`);
            }
            const scheme = a.value.replace(/[\x00-\x20]/g, "").toLowerCase();
            const bad = /^(javascript|vbscript|data):/.test(scheme) && a.value !== "data:,";
            if (urls.includes(a.name) && bad) found.push(`${tag} ${a.name}=${a.value}`);
        }
    }
    return found;
}"""


def test_a_chat_page_full_of_payloads_runs_none_of_them(page, app, llm):
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    base = app.base_url
    sign_up(page, base)
    session = new_session(page)  # the page is open, its socket connected
    token = json.loads(page.locator("body").get_attribute("hx-headers"))["X-CSRFToken"]

    def post(path: str, body: dict) -> None:
        # The API with the browser's own session and CSRF token, from the page's cookie jar.
        answer = page.request.post(base + path, data=body, headers={"X-CSRFToken": token})
        assert answer.ok, (path, answer.status, answer.text())

    for payload in NAMES:
        post("/api/v1/sessions/", {"name": payload})
        post(f"/api/v1/sessions/{session}/checkpoints/", {"name": payload, "description": payload})
    for payload in NAMES[:40]:
        post("/api/v1/keys/", {"name": payload})
    # Each payload as a message, answered with itself by the model: streamed into the open page.
    for payload in PAYLOADS:
        llm.queue(Reply(payload))
        post(f"/api/v1/sessions/{session}/turns/", {"message": payload, "wait": True})
    last = page.locator(FINISHED_ASSISTANT).last
    expect(last).to_contain_text(marker(PAYLOADS[-1]))
    assert (dialogs, page.evaluate(ACTIVE_IN_DOM)) == ([], [])

    # The same conversation rendered by the server, and the panel's details and dialogs.
    page.reload()
    expect(page.locator(FINISHED_ASSISTANT).last).to_contain_text(marker(PAYLOADS[-1]))
    details = page.get_by_test_id("checkpoint-details")
    for i in range(details.count()):
        # One at a time: clicked all at once, under load the last detail did not open within
        # 30 s (and each detail that comes in moves the buttons below it as they are clicked).
        details.nth(i).click()
        page.get_by_test_id("checkpoint-detail").nth(i).wait_for()
    for i in range(5):
        page.get_by_test_id("restore").nth(i).click()
        dialog = page.get_by_test_id("restore-dialog")
        dialog.wait_for(state="visible")
        dialog.locator("[data-close]").click()
        dialog.wait_for(state="detached")
    page.get_by_test_id("session-search").fill(NAMES[0])
    page.get_by_test_id("session").first.wait_for()
    assert (dialogs, page.evaluate(ACTIVE_IN_DOM)) == ([], [])

    page.goto(f"{base}/accounts/profile/")
    page.get_by_test_id("api-key-row").nth(39).wait_for()
    assert (dialogs, page.evaluate(ACTIVE_IN_DOM)) == ([], [])

    # The listener does hear a dialog: a page that ran a payload would have been caught.
    page.evaluate("alert('the listener works')")
    assert dialogs == ["the listener works"]
