"""Governance through the product: an administrator opens a user's session as its tree in the
admin and restores a checkpoint for them with a reason; each of the user's open tabs shows the
notice live, and dismissing it in one tab takes it from the other. The admin's pages and the
notice pass axe at 1366 and 390 px, light and dark."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import PASSWORD, sign_in, sign_in_as_staff, wait_ws_open
from tests.e2e.test_accessibility import violations

pytestmark = pytest.mark.e2e

SEED = """
from accounts.models import User
from checkpoints.services import checkpoint_create
from sessions_app.models import Branch
from sessions_app.services import message_append, session_create
from workspace.services import file_write
user = User.objects.create_user({username!r}, password={password!r})
session = session_create(owner=user, name="Trip planning")
branch = Branch.objects.get(session=session)
message_append(branch=branch, role="user", content="Plan a trip to Lisbon")
message_append(branch=branch, role="assistant", content="Day 1: <b>Alfama</b>, day 2: Belém")
cp = checkpoint_create(branch=branch, name="first plan")
file_write(branch=branch, path="itinerary.md", content="# Lisbon\\n")
message_append(branch=branch, role="user", content="Add my card number 4111 1111 1111 1111")
message_append(branch=branch, role="assistant", content="Noted.")
print(session.pk, cp.pk)
"""


def seed(app, app_settings) -> tuple[str, int, int]:
    """A user with a session of four messages, a checkpoint after the first two and a file
    written after it."""
    username = f"owner{uuid.uuid4().hex[:10]}"
    out = app.manage(app_settings, "shell", "-c", SEED.format(username=username, password=PASSWORD))
    session_pk, checkpoint_pk = (int(x) for x in out.split()[-2:])
    return username, session_pk, checkpoint_pk


def open_chat(page, base_url: str, session_pk: int) -> None:
    page.goto(f"{base_url}/chat/{session_pk}/")
    wait_ws_open(page)


def restore_in_admin(admin, base_url: str, session_pk: int, reason: str, mode: str) -> None:
    admin.goto(f"{base_url}/admin/conversations/{session_pk}/tree/")
    expect(admin.get_by_test_id("gov-checkpoint")).to_have_count(1)
    admin.get_by_test_id("gov-restore-link").click()
    form = admin.get_by_test_id("gov-restore")
    expect(form).to_be_visible()
    form.locator(f"input[name=mode][value={mode}]").check()
    admin.get_by_test_id("gov-reason").fill(reason)
    with admin.expect_navigation():
        admin.get_by_test_id("gov-submit").click()
    expect(admin.locator(".messagelist")).to_contain_text("Done, on the record")


def test_an_admin_restores_for_a_user_and_every_open_tab_shows_why(contexts, app, app_settings):
    username, session_pk, _ = seed(app, app_settings)
    user_context = contexts.new()
    first = user_context.new_page()
    sign_in(first, app.base_url, username)
    open_chat(first, app.base_url, session_pk)
    second = user_context.new_page()
    open_chat(second, app.base_url, session_pk)
    for tab in (first, second):
        expect(tab.get_by_test_id("admin-notice")).to_have_count(0)
        expect(tab.locator("#messages [data-testid=message]")).to_have_count(4)

    admin = contexts.new().new_page()
    admin_name = sign_in_as_staff(admin, app, app_settings)
    reason = "You asked support to remove the card number <script>x</script>"
    restore_in_admin(admin, app.base_url, session_pk, reason, "rewind")
    # The tree now shows the rewound branch, and the record.
    expect(admin.get_by_test_id("gov-message")).to_have_count(2)
    expect(admin.get_by_test_id("gov-record")).to_contain_text(reason)

    for tab in (first, second):
        notice = tab.get_by_test_id("admin-notice")
        expect(notice).to_contain_text("An administrator rewound this conversation")
        expect(notice).to_contain_text("“first plan”")
        expect(notice).to_contain_text("removing 2 messages")
        expect(tab.get_by_test_id("admin-notice-reason")).to_have_text(reason)
        expect(tab.locator("#messages [data-testid=message]")).to_have_count(2)
        assert admin_name not in tab.locator("#notices").inner_text()

    first.get_by_test_id("admin-notice-dismiss").click()
    for tab in (first, second):
        expect(tab.get_by_test_id("admin-notice")).to_have_count(0)
    second.reload()
    wait_ws_open(second)
    expect(second.get_by_test_id("admin-notice")).to_have_count(0)


@pytest.mark.parametrize("width", [1366, 390])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_tree_the_form_and_the_notice_pass_axe(contexts, app, app_settings, scheme, width):
    username, session_pk, checkpoint_pk = seed(app, app_settings)
    options = {"viewport": {"width": width, "height": 844}, "color_scheme": scheme}
    admin = contexts.new(**options).new_page()
    sign_in_as_staff(admin, app, app_settings)
    found = {}
    tree = f"{app.base_url}/admin/conversations/{session_pk}/tree/"
    admin.goto(tree)
    expect(admin.get_by_test_id("gov-tree")).to_be_visible()
    expect(admin.get_by_test_id("gov-message").first).to_contain_text("Plan a trip to Lisbon")
    found["tree"] = violations(admin, targets=True)
    admin.goto(f"{tree}?checkpoint={checkpoint_pk}")
    expect(admin.get_by_test_id("gov-rewind-preview")).to_contain_text("2 messages")
    # What the restore brings back, as the user's own dialog says it; branches by their names,
    # and the breadcrumb's "Sessions" (issue 39).
    outcome = admin.get_by_test_id("gov-restore-outcome")
    expect(outcome.get_by_test_id("restore-files")).to_contain_text("itinerary.md")
    expect(admin.get_by_test_id("gov-restore")).to_contain_text("at message 2 of main")
    assert re.search(r"branch \d", admin.get_by_test_id("gov-restore").inner_text()) is None
    expect(admin.locator(".breadcrumbs")).to_contain_text("Sessions")
    assert "External" not in admin.locator(".breadcrumbs").inner_text()
    found["form"] = violations(admin, targets=True)
    admin.get_by_test_id("gov-submit").click()  # no reason: the form says so
    expect(admin.get_by_test_id("gov-reason-error")).to_be_visible()
    found["form with an error"] = violations(admin, targets=True)
    # The page does not scroll sideways on a phone.
    assert admin.evaluate("() => document.documentElement.scrollWidth") <= width + 1
    restore_in_admin(admin, app.base_url, session_pk, "Fixing the plan", "branch")
    admin.goto(f"{app.base_url}/admin/governance/auditrecord/")
    expect(admin.locator("#result_list")).to_contain_text("Fixing the plan")
    found["records"] = violations(admin)

    user = contexts.new(**options).new_page()
    sign_in(user, app.base_url, username)
    open_chat(user, app.base_url, session_pk)
    expect(user.get_by_test_id("admin-notice")).to_contain_text("An administrator restored")
    found["chat with the notice"] = violations(user, targets=True)
    box = user.get_by_test_id("admin-notice-dismiss").bounding_box()
    assert box is not None
    assert box["height"] >= (44 if width < 700 else 24)
    failing = {name: v for name, v in found.items() if v}
    assert not failing, json.dumps(failing, indent=1)
    assert re.search(r"/chat/\d+/$", user.url)
