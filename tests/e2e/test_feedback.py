"""A reply's thumbs and note, and "Regenerate with…" another model, in Chromium at 1366 and
390 px, light and dark, with axe (issue 39): a rating is pressed, taken back and kept through a
reload; a thumbs down asks why, a note too long is refused in place with what was typed kept;
a reply regenerated with another model is a new version that model wrote, and says so."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import FINISHED_ASSISTANT, chat, new_session, sign_up, wait_ws_open
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


def test_a_refresh_read_before_a_rating_never_takes_it_back(contexts, app, llm):
    """A live refresh (another tab renamed the session) read before the rating was written, and
    arriving after it, left the reply rated in the database but not on the page (the clean-
    clone CI saw it once: the title's refresh after a first turn). Held here until after the
    rating's answer."""
    page = contexts.new().new_page()
    sign_up(page, app.base_url)
    session = new_session(page)
    llm.queue(Reply("Rated later."))
    chat(page, "Rate this")
    held: list = []

    def hold(route) -> None:
        held.append((route, route.fetch()))  # the server's state now: not rated yet

    page.route(f"**/chat/{session}/refresh/**", hold)
    renamed = page.evaluate(
        """async (id) => {
            const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
            const answer = await fetch(`/api/v1/sessions/${id}/`, {
                method: "PATCH",
                headers: {"Content-Type": "application/json", "X-CSRFToken": token},
                body: JSON.stringify({name: "Renamed elsewhere"}),
            });
            return answer.status;
        }""",
        session,
    )
    assert renamed == 200
    deadline = 100
    while not held and deadline:
        page.wait_for_timeout(100)
        deadline -= 1
    assert held, "the rename's refresh never came"
    reply = page.locator(FINISHED_ASSISTANT).last
    reply.get_by_test_id("feedback-up").click()
    expect(reply.get_by_test_id("feedback-up")).to_have_attribute("aria-pressed", "true")
    for route, answer in held:
        route.fulfill(response=answer)
    page.unroute(f"**/chat/{session}/refresh/**")
    expect(page.get_by_test_id("session-title")).to_have_text("Renamed elsewhere")
    page.wait_for_timeout(300)  # whatever the refresh morphs, it has morphed
    expect(reply.get_by_test_id("feedback-up")).to_have_attribute("aria-pressed", "true")
