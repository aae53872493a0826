"""Usage people can see (issue 40 item 5), in Chromium at 1366 and 390 px, light and dark, with
axe: a message answered by the offline demo model shows its tokens in the chat's header; the
usage page shows the day and the model with the same tokens, a chart whose figures a screen
reader reads, and says plainly when a period cannot be read."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from playwright.sync_api import expect

from .conftest import FINISHED_ASSISTANT, chat, new_session
from .test_accessibility import violations
from .test_demo import demo_app  # noqa: F401 - the app with no model server: the demo model
from .test_third_round import IDS, LOOKS, drawer, opened

pytestmark = pytest.mark.e2e


def _tokens(text: str) -> int:
    found = re.search(r"([\d,]+) tokens", text)
    assert found, text
    return int(found.group(1).replace(",", ""))


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_a_message_s_tokens_show_in_the_header_and_on_the_usage_page(
    contexts,
    demo_app,  # noqa: F811
    width,
    scheme,
):
    page = opened(contexts, demo_app, width, scheme)
    drawer(page, width)
    new_session(page)
    chat(page, "How many tokens is this")
    expect(page.locator(FINISHED_ASSISTANT).last.locator(".badge.demo")).to_have_text("demo model")
    # The title is the demo model's answer to a call of its own, counted too: once it shows, the
    # conversation's usage is complete (the header came with the same refresh).
    expect(page.get_by_test_id("session-title")).to_have_text("How many tokens is this")
    if width < 700:
        page.get_by_test_id("header-more").click()  # a phone's header details
    shown = page.get_by_test_id("conversation-usage")
    expect(shown).to_be_visible()
    expect(shown).to_contain_text(re.compile(r"^[\d,]+ tokens · \$0\.00"))
    tokens = _tokens(page.get_by_test_id("conversation-tokens").inner_text())
    assert tokens > 0
    assert violations(page) == [], "the chat's header"

    if width < 700:
        page.get_by_test_id("header-more").click()
        page.get_by_test_id("profile-link").click()
        page.get_by_test_id("profile-usage-link").click()
    else:
        page.get_by_test_id("usage-link").click()
    page.wait_for_url(re.compile(r"/accounts/usage/$"))
    today = datetime.now(UTC)
    day = page.get_by_test_id("usage-day")
    expect(day).to_have_count(1)
    expect(day.locator("th")).to_have_text(f"{today.day} {today:%b %Y}")
    expect(day.get_by_test_id("usage-day-model").locator("td").first).to_have_text("rollback-demo")
    model = page.get_by_test_id("usage-model")
    expect(model).to_have_count(1)
    expect(model.locator("th")).to_have_text("rollback-demo")
    cells = [int(c.replace(",", "")) for c in model.locator("td.num").all_inner_texts()[:2]]
    assert sum(cells) == tokens, (cells, tokens)
    expect(page.get_by_test_id("usage-total")).to_contain_text(f"{tokens:,} tokens")
    chart = page.get_by_role("img", name=re.compile(r"^Tokens per day from "))
    expect(chart).to_have_attribute("aria-label", re.compile(f"{tokens:,} tokens in all"))
    expect(page.get_by_role("table", name="Usage by day (UTC)")).to_be_visible()
    expect(page.get_by_test_id("no-budget")).to_be_visible()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    assert violations(page) == [], "the usage page"

    page.get_by_test_id("usage-from").fill("2026-12-05")
    page.get_by_test_id("usage-to").fill("2026-12-01")
    page.get_by_test_id("usage-show").click()
    expect(page.get_by_role("alert")).to_contain_text("“from” (2026-12-05) is after “to”")
    expect(page.get_by_test_id("usage-chart")).to_have_count(0)
    assert violations(page) == [], "the usage page's refusal"
