"""Bringing a history in from the sidebar, in Chromium at 1366 and 390 px, light and dark, with
axe (issue 39): a ChatGPT export of several conversations answers in place with the job's
progress, which polls until it lists the sessions it made, each opening on the conversation's
current branch; a broken file is refused in place, saying why, and makes nothing."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.checkpoints.foreign_exports import chatgpt_conversation, chatgpt_export

from .conftest import message_texts, wait_ws_open
from .test_accessibility import violations
from .test_third_round import IDS, LOOKS, drawer, opened

pytestmark = pytest.mark.e2e


def upload(page, name: str, raw: bytes) -> None:
    page.get_by_test_id("import-file").set_input_files(
        {"name": name, "mimeType": "application/json", "buffer": raw}
    )
    page.get_by_test_id("import").click()


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_a_chatgpt_export_imports_from_the_sidebar_and_a_broken_one_is_refused(
    contexts, app, width, scheme
):
    page = opened(contexts, app, width, scheme)
    drawer(page, width)
    before = page.get_by_test_id("session").count()

    upload(page, "conversations.json", b'[{"title": "cut off", "mapping": {')
    expect(page.get_by_test_id("import-failed")).to_contain_text("Import failed: ")
    assert violations(page) == [], "the refusal"
    expect(page.get_by_test_id("session")).to_have_count(before)

    titles = ["Lisbon", "Porto", "Faro"]
    upload(page, "conversations.json", chatgpt_export(*map(chatgpt_conversation, titles)))
    job = page.get_by_test_id("import-job")
    expect(job).to_contain_text("Import of ChatGPT (conversations.json)")
    expect(job).to_have_attribute("data-status", "done", timeout=30_000)
    expect(page.get_by_test_id("import-done")).to_have_text("Imported 3 of 3 conversations.")
    links = page.get_by_test_id("import-sessions").get_by_role("link")
    expect(links).to_have_text(titles)
    assert violations(page) == [], "the finished import"

    links.first.click()
    page.wait_for_url(f"{app.base_url}/chat/*/")
    wait_ws_open(page)
    # The conversation's current branch: the edited question and the regenerated answer.
    assert message_texts(page) == ["Q1", "A1", "Q2", "A2-regenerated"]
    assert violations(page) == [], "the imported session"
