"""Issue 39's checkpoint choices in Chromium, at 1366 and 390 px, light and dark, with axe: the
restore dialog asks what to restore (the conversation and files, the conversation only, the
files only) and a rewind warns of the live share links it would cut, which the profile then
counts as they now show; a checkpoint before each message, chosen for one session or on the
profile, is taken and named after the message."""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import PASSWORD, chat, checkpoint, open_restore, sign_in, wait_ws_open
from .test_accessibility import violations
from .test_third_round import IDS, LOOKS, drawer, opened

pytestmark = pytest.mark.e2e

# A user with four messages, a checkpoint after the first two, their own upload after it, and a
# share link of the whole branch (four messages).
SEED = """
from accounts.models import User
from checkpoints.services import checkpoint_create
from sessions_app.models import Branch
from sessions_app.services import message_append, session_create
from sharing.services import share_create
from workspace.services import file_write
user = User.objects.create_user({username!r}, password={password!r})
session = session_create(owner=user, name="Garden plan")
branch = Branch.objects.get(session=session)
message_append(branch=branch, role="user", content="Which vegetables for a shady bed?")
message_append(branch=branch, role="assistant", content="Lettuce, spinach and chard.")
checkpoint_create(branch=branch, name="first list")
file_write(branch=branch, path="beds.md", content="# Beds\\n- shady: lettuce\\n")
message_append(branch=branch, role="user", content="And for a sunny one?")
message_append(branch=branch, role="assistant", content="Tomatoes and peppers.")
share_create(owner=user, branch=branch)
print(session.pk)
"""


def seeded(contexts, app, app_settings, width: int, scheme: str):
    """The seeded user signed in on their session, at `width` in `scheme`."""
    username = f"garden{uuid.uuid4().hex[:10]}"
    out = app.manage(app_settings, "shell", "-c", SEED.format(username=username, password=PASSWORD))
    session = int(out.split()[-1])
    page = contexts.new(viewport={"width": width, "height": 844}).new_page()
    page.emulate_media(color_scheme=scheme)
    sign_in(page, app.base_url, username)
    page.goto(f"{app.base_url}/chat/{session}/")
    wait_ws_open(page)
    return page


def side_panel(page, width: int) -> None:
    """The checkpoints, branches and files (a drawer on a narrow screen)."""
    if width < 1000 and not page.locator("#side-panel").is_visible():
        page.get_by_test_id("toggle-panel").click()
    expect(page.locator("#side-panel")).to_be_visible()


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_a_rewind_of_the_conversation_only_keeps_the_files_and_says_what_links_it_cuts(
    contexts, app, app_settings, width, scheme
):
    page = seeded(contexts, app, app_settings, width, scheme)
    side_panel(page, width)
    expect(page.get_by_test_id("files-count")).to_have_text("1")
    dialog = open_restore(page, "first list")
    scopes = dialog.get_by_test_id("restore-scope")
    expect(scopes).to_have_count(3)
    expect(dialog.locator("[data-testid=restore-scope][data-scope=all]")).to_be_checked()
    expect(dialog.get_by_test_id("scope-note-all")).to_have_text(
        "The conversation goes back to its first 2 messages, and the files as listed below."
    )
    expect(dialog.get_by_test_id("restore-files")).to_contain_text("beds.md")
    dialog.locator("[data-testid=restore-mode][data-mode=rewind]").check()
    expect(dialog.get_by_test_id("rewind-warning")).to_contain_text(
        "permanently deletes 2 later messages"
    )
    expect(dialog.get_by_test_id("rewind-shares")).to_have_text(
        "1 live share link of this branch will show only the messages up to this checkpoint."
    )
    dialog.locator("[data-testid=restore-scope][data-scope=conversation]").check()
    assert violations(page) == [], "the restore dialog"
    box = dialog.get_by_test_id("confirm-restore").bounding_box()
    assert box is not None
    assert box["x"] + box["width"] <= width

    dialog.get_by_test_id("confirm-restore").click()
    expect(dialog).to_have_count(0)
    expect(page.locator("#messages [data-testid=message]")).to_have_count(2)
    side_panel(page, width)
    expect(page.get_by_test_id("files-count")).to_have_text("1")  # the files stayed

    page.goto(f"{app.base_url}/accounts/profile/")
    expect(page.get_by_test_id("share-shown")).to_have_text(
        "2 messages (a rewind removed the rest of the 4 shared)"
    )
    assert violations(page) == [], "the profile's share links"


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_a_checkpoint_before_each_message_from_the_session_or_the_profile(
    contexts, app, llm, width, scheme
):
    page = opened(contexts, app, width, scheme)
    drawer(page, width)
    page.get_by_test_id("new-session").first.click()
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    wait_ws_open(page)
    session_url = page.url

    # On for this session, from its settings dialog (a phone's header keeps it under "⋯").
    if width < 700:
        page.get_by_test_id("header-more").click()
    page.get_by_test_id("open-instructions").click()
    dialog = page.get_by_test_id("session-settings-dialog")
    expect(dialog).to_be_visible()
    choice = dialog.get_by_test_id("session-checkpoint-each-message")
    expect(choice).to_have_value("")  # as on the profile: off
    expect(choice.locator("option").first).to_have_text("As on your profile (off)")
    choice.select_option("on")
    assert violations(page) == [], "the session's settings"
    dialog.get_by_test_id("save-instructions").click()
    expect(dialog).to_have_count(0)
    llm.queue(Reply("Basil likes sun."))
    chat(page, "Where should basil grow in my garden this year?")
    side_panel(page, width)
    expect(checkpoint(page, "Before: Where should basil grow in my garden…")).to_have_count(1)
    assert violations(page) == [], "the chat with the checkpoint"

    # Off for the session, on for the profile: the session's own choice wins.
    page.goto(f"{app.base_url}/accounts/profile/")
    profile = page.get_by_test_id("checkpoint-each-message")
    expect(profile).not_to_be_checked()
    profile.check()
    assert violations(page) == [], "the profile"
    with page.expect_navigation():
        page.get_by_test_id("save-preferences").click()
    expect(page.get_by_test_id("checkpoint-each-message")).to_be_checked()
    page.goto(session_url)
    wait_ws_open(page)
    if width < 700:
        page.get_by_test_id("header-more").click()
    page.get_by_test_id("open-instructions").click()
    dialog = page.get_by_test_id("session-settings-dialog")
    expect(dialog.get_by_test_id("session-checkpoint-each-message")).to_have_value("on")
    dialog.get_by_test_id("session-checkpoint-each-message").select_option("off")
    dialog.get_by_test_id("save-instructions").click()
    expect(dialog).to_have_count(0)
    llm.queue(Reply("Mint spreads."))
    chat(page, "And mint?")
    side_panel(page, width)
    expect(page.get_by_test_id("checkpoint")).to_have_count(1)

    # A new session follows the profile: on.
    page.goto(f"{app.base_url}/chat/")
    drawer(page, width)
    page.get_by_test_id("new-session").first.click()
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    wait_ws_open(page)
    llm.queue(Reply("Yes."))
    chat(page, "Does thyme need water?")
    side_panel(page, width)
    expect(checkpoint(page, "Before: Does thyme need water?")).to_have_count(1)
