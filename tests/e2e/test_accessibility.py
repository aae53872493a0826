"""Accessibility checked by axe-core (tests/e2e/vendor/axe.min.js, from the npm registry) in
Chromium: no serious or critical violation on the home, chat, profile, memories and admin pages
(the operator's dashboard and the audit records too), in the light and the dark theme, 1366 and
390 px wide; on the chat, with its panels, drawers and the restore dialog open, and no error on the
console through a turn, a stop, a checkpoint and a restore."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import (
    chat,
    new_session,
    open_restore,
    save_checkpoint,
    send_message,
    sign_in_as_staff,
    sign_up,
    wait_turn_done,
)

pytestmark = pytest.mark.e2e

AXE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text()
# Runs axe on the document (evaluated through the DevTools protocol, which the page's
# Content-Security-Policy does not apply to) and keeps the serious and critical findings.
# With `targets`, also WCAG 2.2's target size (24 px), a rule axe leaves off by default.
RUN = """async (targets) => {
    const rules = {"target-size": {enabled: targets}};
    const result = await axe.run(document, {resultTypes: ["violations"], rules});
    return result.violations
        .filter(v => v.impact === "serious" || v.impact === "critical")
        .map(v => ({rule: v.id, impact: v.impact, help: v.help,
                    where: v.nodes.slice(0, 5).map(n => n.target.join(" "))}));
}"""


def violations(page, targets: bool = False) -> list[dict]:
    page.evaluate(AXE + "\n;0")
    return page.evaluate(RUN, targets)


@pytest.mark.parametrize("width", [1366, 390])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_or_critical_violation_on_any_page(page, app, app_settings, llm, scheme, width):
    page.set_viewport_size({"width": width, "height": 844})
    page.emulate_media(color_scheme=scheme)
    sign_in_as_staff(page, app, app_settings)
    found = {"home": violations(page)}
    if width < 700:
        page.get_by_test_id("toggle-sidebar").click()
    new_session(page)
    llm.queue(
        Reply("Here is code:\n\n```python\nprint('hi')\n```\n\n| a | b |\n|--:|---|\n| 1 | 2 |")
    )
    before = send_message(page, "hello")
    wait_turn_done(page, before)
    found["chat"] = violations(page)
    page.goto(f"{app.base_url}/accounts/profile/")
    found["profile"] = violations(page)
    page.goto(f"{app.base_url}/memories/")
    found["memories"] = violations(page)
    page.goto(f"{app.base_url}/admin/")
    found["admin"] = violations(page)
    page.goto(f"{app.base_url}/admin/sessions_app/session/")
    found["admin sessions"] = violations(page)
    page.goto(f"{app.base_url}/admin/dashboard/")
    found["admin dashboard"] = violations(page)
    page.goto(f"{app.base_url}/admin/ops/auditrecord/")
    found["admin audit records"] = violations(page)
    failing = {name: v for name, v in found.items() if v}
    assert not failing, json.dumps(failing, indent=1)


SIZES = {"wide": (1366, 800), "phone": (390, 844)}
SCHEMES = ("light", "dark")


class ConsoleErrors:
    """The page's console errors (htmx logs a swap it cannot do, Chromium a refused style)."""

    def __init__(self, page) -> None:
        self.seen: list[str] = []
        page.on("console", lambda m: self.seen.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.seen.append(f"uncaught: {e}"))

    def assert_none(self, when: str) -> None:
        assert not self.seen, f"{when}: {self.seen}"


def demo_badge(page) -> None:
    """The offline demo model's badge, as every page shows it when no model server is set (the
    served app talks to a fake model server, so it has no badge of its own)."""
    page.evaluate(
        """() => {
            if (document.querySelector("[data-testid=demo-label]")) return;
            const badge = document.createElement("span");
            badge.className = "badge demo";
            badge.dataset.testid = "demo-label";
            badge.textContent = "Offline demo model";
            document.querySelector(".topbar .brand").after(badge);
        }"""
    )


def open_everything(page, app, llm, width: int, errors: ConsoleErrors) -> dict[str, list]:
    """A turn, a stop, a checkpoint, the panel (the drawers on a phone), the files and the
    restore dialog, with axe run on each; a restore at the end."""
    found: dict[str, list] = {}
    demo_badge(page)
    found["chat"] = violations(page, targets=True)
    if width < 700:
        page.get_by_test_id("toggle-sidebar").click()
        expect(page.locator("#sidebar")).to_be_visible()
        found["sessions drawer"] = violations(page, targets=True)
        page.get_by_test_id("close-sidebar").click()
        page.get_by_test_id("toggle-panel").click()
    expect(page.locator("#side-panel")).to_be_visible()
    expect(page.get_by_test_id("files-tree")).to_be_visible()
    found["panel and files"] = violations(page, targets=True)
    save_checkpoint(page, "look")
    llm.queue(Reply("| wide | table |\n|---|---|\n| " + "w" * 300 + " | x |"))
    chat(page, "after the checkpoint")
    llm.queue(Reply(" ".join(f"word{i}" for i in range(40)), delay=0.2))
    if width < 1000:
        page.get_by_test_id("close-panel").click()
    send_message(page, "a long story, stopped")
    expect(page.locator("#messages [data-streaming=true] .body")).to_contain_text("word2")
    page.get_by_test_id("stop").click()
    expect(page.get_by_test_id("stopped-badge")).to_be_visible()
    expect(page.get_by_test_id("send")).to_be_visible()
    page.wait_for_timeout(300)  # the stop's own refresh
    if width < 1000:
        page.get_by_test_id("toggle-panel").click()
    dialog = open_restore(page, "look")
    found["restore dialog"] = violations(page, targets=True)
    with page.expect_response(lambda r: "/restore/" in r.url and r.request.method == "POST"):
        dialog.get_by_test_id("confirm-restore").click()
    expect(dialog).to_be_hidden()
    errors.assert_none(f"{width} px")
    return {name: v for name, v in found.items() if v}


def test_every_panel_and_dialog_passes_axe_at_both_sizes_in_both_themes(contexts, app, llm):
    failing: dict[str, dict] = {}
    for size, (width, height) in SIZES.items():
        for scheme in SCHEMES:
            page = contexts.new(viewport={"width": width, "height": height}).new_page()
            page.emulate_media(color_scheme=scheme)
            errors = ConsoleErrors(page)
            sign_up(page, app.base_url)
            if width < 700:
                page.get_by_test_id("toggle-sidebar").click()
            new_session(page)
            llm.queue(Reply("Here is `code` and a **reply**."))
            chat(page, "hello")
            found = open_everything(page, app, llm, width, errors)
            if found:
                failing[f"{size} {scheme}"] = found
            page.context.close()
    assert not failing, json.dumps(failing, indent=1)
