"""Accessibility checked by axe-core (tests/e2e/vendor/axe.min.js, from the npm registry) in
Chromium: no serious or critical violation on the home, chat, profile, memories and admin pages
(the operator's dashboard and the audit records too), in the light and the dark theme."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.chat_server import Reply

from .conftest import new_session, send_message, sign_in_as_staff, wait_turn_done

pytestmark = pytest.mark.e2e

AXE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text()
# Runs axe on the document (evaluated through the DevTools protocol, which the page's
# Content-Security-Policy does not apply to) and keeps the serious and critical findings.
RUN = """async () => {
    const result = await axe.run(document, {resultTypes: ["violations"]});
    return result.violations
        .filter(v => v.impact === "serious" || v.impact === "critical")
        .map(v => ({rule: v.id, impact: v.impact, help: v.help,
                    where: v.nodes.slice(0, 5).map(n => n.target.join(" "))}));
}"""


def violations(page) -> list[dict]:
    page.evaluate(AXE + "\n;0")
    return page.evaluate(RUN)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_or_critical_violation_on_any_page(page, app, app_settings, llm, scheme):
    page.emulate_media(color_scheme=scheme)
    sign_in_as_staff(page, app, app_settings)
    found = {"home": violations(page)}
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
    page.goto(f"{app.base_url}/admin/sessions_app/externalsession/")
    found["admin sessions"] = violations(page)
    page.goto(f"{app.base_url}/admin/dashboard/")
    found["admin dashboard"] = violations(page)
    page.goto(f"{app.base_url}/admin/ops/auditrecord/")
    found["admin audit records"] = violations(page)
    failing = {name: v for name, v in found.items() if v}
    assert not failing, json.dumps(failing, indent=1)
