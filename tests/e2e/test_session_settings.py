"""The model picker, the session's instructions dialog and the profile's instructions, in
Chromium at 1366 and 390 px, light and dark: axe finds nothing serious on them; a model chosen
in one tab shows in the other and answers the next turn; the instructions reach the model; too
long instructions are refused in place with what was typed kept."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import (
    TURN_TIMEOUT_MS,
    Services,
    app_env,
    new_session,
    send_message,
    sign_up,
    wait_turn_done,
    wait_ws_open,
)
from .test_accessibility import violations

pytestmark = pytest.mark.e2e

SIZES = ((1366, 900), (390, 844))
SCHEMES = ("light", "dark")
TOO_LONG = "z" * 8_001


@pytest.fixture(scope="module")
def models_app(model_server, tmp_path_factory) -> Iterator[Services]:
    """The app served with three models a session may choose."""
    env = app_env(
        tmp_path_factory.mktemp("models-var"),
        model_server.base_url,
        AGENT_ALLOWED_MODELS="fake-large,fake-small",
    )
    services = Services(tmp_path_factory.mktemp("models-logs"))
    try:
        services.prepare(env)
        services.start_daphne(env)
        yield services
    finally:
        services.stop_all()


def within_width(page, testid: str) -> None:
    """The element is shown whole, inside the viewport's width."""
    box = page.get_by_test_id(testid).bounding_box()
    assert box is not None, testid
    width = page.viewport_size["width"]
    assert box["x"] >= 0, (testid, box)
    assert box["x"] + box["width"] <= width, (testid, box, width)


def refuse_too_long(page, field: str, save: str) -> None:
    """Type more than the limit (the field's maxlength taken off, as an old browser would) and
    save: the reason shows in place and the text stays."""
    page.get_by_test_id(field).evaluate("(box) => box.removeAttribute('maxlength')")
    page.get_by_test_id(field).fill(TOO_LONG)
    page.get_by_test_id(save).click()


def test_profile_picker_and_dialog_at_both_sizes_in_both_themes(contexts, models_app, llm):
    base = models_app.base_url
    first = contexts.new().new_page()
    sign_up(first, base)

    # The profile's instructions: saved, and refused in place when too long.
    first.goto(f"{base}/accounts/profile/")
    first.get_by_test_id("user-instructions").fill("Answer in French.")
    with first.expect_navigation():
        first.get_by_test_id("save-preferences").click()
    expect(first.get_by_test_id("user-instructions")).to_have_value("Answer in French.")
    refuse_too_long(first, "user-instructions", "save-preferences")
    expect(first.get_by_text("the limit is 8,000")).to_be_visible()
    expect(first.get_by_test_id("user-instructions")).to_have_value(TOO_LONG)
    first.goto(f"{base}/accounts/profile/")
    expect(first.get_by_test_id("user-instructions")).to_have_value("Answer in French.")

    first.goto(f"{base}/chat/")
    session = new_session(first)
    second = first.context.new_page()
    second.goto(f"{base}/chat/{session}/")
    wait_ws_open(second)

    for width, height in SIZES:
        for scheme in SCHEMES:
            where = f"{width}px {scheme}"
            first.set_viewport_size({"width": width, "height": height})
            first.emulate_media(color_scheme=scheme)
            first.reload()
            wait_ws_open(first)
            if width < 700:
                first.get_by_test_id("header-more").click()  # a phone's header details
            expect(first.get_by_test_id("model-picker")).to_be_visible()
            within_width(first, "model-picker")
            within_width(first, "open-instructions")
            assert violations(first) == [], where
            first.get_by_test_id("open-instructions").click()
            expect(first.get_by_test_id("session-settings-dialog")).to_be_visible()
            within_width(first, "session-instructions")
            within_width(first, "save-instructions")
            assert violations(first) == [], f"{where}, dialog open"
            first.get_by_test_id("session-settings-dialog").get_by_text("Cancel").click()
            expect(first.get_by_test_id("session-settings-dialog")).to_have_count(0)
            first.goto(f"{base}/accounts/profile/")
            within_width(first, "user-instructions")
            assert violations(first) == [], f"{where}, profile"
            first.goto(f"{base}/chat/{session}/")
            wait_ws_open(first)

    # A model chosen in one tab shows in the other, and answers the next turn (on a wide
    # screen, where the header shows the picker in line).
    first.set_viewport_size({"width": 1366, "height": 900})
    first.reload()
    wait_ws_open(first)
    picker = first.get_by_test_id("model-picker")
    expect(picker).to_have_value("fake-model")
    expect(picker.locator("option")).to_have_text(["fake-model", "fake-large", "fake-small"])
    picker.select_option("fake-large")
    expect(second.get_by_test_id("model-picker")).to_have_value("fake-large")

    # The session's instructions: saved from the dialog, marked in both tabs.
    first.get_by_test_id("open-instructions").click()
    first.get_by_test_id("session-instructions").fill("Call me Captain.")
    first.get_by_test_id("save-instructions").click()
    expect(first.get_by_test_id("session-settings-dialog")).to_have_count(0)
    for tab in (first, second):
        expect(tab.get_by_test_id("instructions-set")).to_be_visible()

    # Too long: the reason in the open dialog, the text kept, nothing written.
    first.get_by_test_id("open-instructions").click()
    expect(first.get_by_test_id("session-instructions")).to_have_value("Call me Captain.")
    refuse_too_long(first, "session-instructions", "save-instructions")
    expect(first.get_by_test_id("instructions-error")).to_contain_text("the limit is 8,000")
    expect(first.get_by_test_id("session-instructions")).to_have_value(TOO_LONG)
    first.get_by_test_id("session-settings-dialog").get_by_text("Cancel").click()

    llm.queue(Reply("Oui, Capitaine."))
    before = send_message(second, "hello")
    wait_turn_done(second, before, timeout=TURN_TIMEOUT_MS)
    request = llm.requests[-1]
    assert request["model"] == "fake-large"
    system = request["messages"][0]["content"]
    assert "<user_instructions>\nAnswer in French.\n</user_instructions>" in system
    assert "<session_instructions>\nCall me Captain.\n</session_instructions>" in system
