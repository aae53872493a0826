"""A reply's thumbs and note, and "Regenerate with…" another model, in Chromium at 1366 and
390 px, light and dark, with axe (issue 39): a rating is pressed, taken back and kept through a
reload; a thumbs down asks why, a note too long is refused in place with what was typed kept;
a reply regenerated with another model is a new version that model wrote, and says so."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import FINISHED_ASSISTANT, chat, new_session, wait_ws_open
from .test_accessibility import violations
from .test_session_settings import models_app  # noqa: F401 - the app with three models
from .test_third_round import IDS, LOOKS, drawer, opened

pytestmark = pytest.mark.e2e

NOTE_MAX = 2_000


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_rate_a_reply_note_why_and_regenerate_it_with_another_model(
    contexts,
    models_app,  # noqa: F811
    llm,
    width,
    scheme,
):
    page = opened(contexts, models_app, width, scheme)
    drawer(page, width)
    new_session(page)
    llm.queue(Reply("Paris is the capital of France."))
    chat(page, "What is the capital of France?")
    reply = page.locator(FINISHED_ASSISTANT).last
    up, down = reply.get_by_test_id("feedback-up"), reply.get_by_test_id("feedback-down")
    expect(up).to_have_attribute("aria-pressed", "false")

    up.click()
    expect(up).to_have_attribute("aria-pressed", "true")
    expect(reply.get_by_test_id("feedback-note")).not_to_have_attribute("open", "")
    up.click()  # pressed again: taken back
    expect(up).to_have_attribute("aria-pressed", "false")
    expect(reply.get_by_test_id("feedback-note")).to_have_count(0)

    down.click()
    expect(down).to_have_attribute("aria-pressed", "true")
    note = reply.get_by_test_id("feedback-note-text")
    expect(note).to_be_visible()  # a thumbs down asks why
    assert violations(page) == [], "the note's field"
    # Too long (the field's bound taken off, as an old browser would): refused, the text kept.
    note.evaluate("(box) => box.removeAttribute('maxlength')")
    note.fill("w" * (NOTE_MAX + 1))
    reply.get_by_test_id("feedback-note-save").click()
    expect(page.locator("#notices [data-testid=notice]")).to_contain_text("the limit is 2,000")
    expect(note).to_have_value("w" * (NOTE_MAX + 1))
    note.fill("It left out that Paris is also the largest city.")
    reply.get_by_test_id("feedback-note-save").click()
    expect(reply.get_by_test_id("feedback-noted")).to_be_visible()

    page.reload()
    wait_ws_open(page)
    reply = page.locator(FINISHED_ASSISTANT).last
    expect(reply.get_by_test_id("feedback-down")).to_have_attribute("aria-pressed", "true")
    expect(reply.get_by_test_id("feedback-noted")).to_be_visible()

    # Regenerate with another model: a second version of the reply, written by that model.
    reply.hover()
    menu = reply.get_by_test_id("regenerate-with")
    menu.locator("summary").click()
    choices = menu.get_by_test_id("regenerate-model")
    expect(choices).to_have_text(["fake-model", "fake-large", "fake-small"])
    assert violations(page) == [], "the regenerate menu"
    llm.queue(Reply("Paris, also France's largest city."))
    choices.filter(has_text="fake-small").click()
    reply = page.locator(FINISHED_ASSISTANT).last
    expect(reply.locator(".body")).to_have_text("Paris, also France's largest city.")
    expect(reply.get_by_test_id("versions").get_by_test_id("version-index")).to_have_text("2/2")
    expect(reply.get_by_test_id("reply-model")).to_have_text("fake-small")
    assert llm.requests[-1]["model"] == "fake-small"
    # The new version is not rated; the first keeps its rating.
    expect(reply.get_by_test_id("feedback-down")).to_have_attribute("aria-pressed", "false")
    reply.get_by_test_id("versions").get_by_test_id("version-previous").click()
    expect(reply.locator(".body")).to_have_text("Paris is the capital of France.")
    expect(reply.get_by_test_id("feedback-down")).to_have_attribute("aria-pressed", "true")
    assert violations(page) == [], "the regenerated reply"
