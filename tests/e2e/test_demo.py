"""With no model server configured, the offline demo model answers, and the chat's header says
so: no picker naming a model that is not answering (issue 39), in Chromium at 1366 and 390 px,
light and dark, with axe."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from .conftest import FINISHED_ASSISTANT, Services, app_env, chat, new_session, served, wait_ws_open
from .test_accessibility import violations
from .test_third_round import IDS, LOOKS, drawer, opened

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def demo_app(tmp_path_factory) -> Iterator[Services]:
    """The app served as a fresh install runs it: no OPENAI_* at all, the default model and
    another allowed one, which the demo model cannot be."""
    env = app_env(
        tmp_path_factory.mktemp("demo-var"),
        "",
        OPENAI_API_KEY="",
        AGENT_MODEL="gpt-4o-mini",
        AGENT_ALLOWED_MODELS="gpt-4o",
        DEMO_MODEL_WORD_DELAY="0",
    )
    yield from served(env, tmp_path_factory.mktemp("demo-logs"))


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_the_header_names_the_demo_model_that_answers(contexts, demo_app, width, scheme):
    page = opened(contexts, demo_app, width, scheme)
    drawer(page, width)
    session = new_session(page)
    chat(page, "Hello there")
    expect(page.locator(FINISHED_ASSISTANT).last.locator(".badge.demo")).to_have_text("demo model")
    page.goto(f"{demo_app.base_url}/chat/{session}/")
    wait_ws_open(page)
    if width < 700:
        page.get_by_test_id("header-more").click()  # a phone's header details
    expect(page.get_by_test_id("model-picker")).to_have_count(0)
    name = page.get_by_test_id("model-name")
    expect(name).to_be_visible()
    expect(name).to_have_text("Offline demo model")
    expect(name).to_have_attribute("data-model", "rollback-demo")
    assert "gpt-4o" not in page.locator("#conv-header").inner_text()
    # No "Regenerate with…" either: the demo answers whatever is asked.
    expect(page.get_by_test_id("regenerate-with")).to_have_count(0)
    assert violations(page) == []
