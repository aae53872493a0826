"""Attachments from the composer in Chromium: a file chosen with Attach, and one dropped on the
composer, go into the workspace (the Files panel shows them at once) and the draft names them;
one over the file bound (WORKSPACE_MAX_FILE_BYTES) is refused under the composer and nothing is
written."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import new_session, sign_up

pytestmark = pytest.mark.e2e

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f80f000001010000b9f3b2f00000000049454e44ae426082"
)


def test_attach_and_drop_put_files_in_the_workspace_and_name_them_in_the_draft(page, app):
    sign_up(page, app.base_url)
    new_session(page)
    page.get_by_test_id("message-input").fill("Look at this:")
    page.get_by_test_id("composer-attach-files").set_input_files(
        {"name": "dot.png", "mimeType": "image/png", "buffer": PNG}
    )
    expect(page.locator('[data-testid=file-item][data-path="dot.png"]')).to_be_visible()
    expect(page.get_by_test_id("message-input")).to_have_value("Look at this:\nAttached: `dot.png`")
    expect(page.get_by_test_id("composer-attach-status")).to_contain_text("dot.png")

    page.locator('[data-testid=file-item][data-path="dot.png"]').get_by_test_id(
        "file-open-link"
    ).click()
    image = page.get_by_test_id("file-image")
    expect(image).to_be_visible()
    assert page.evaluate("img => img.naturalWidth", image.element_handle()) == 1

    dropped = page.evaluate_handle(
        """() => { const t = new DataTransfer();
            t.items.add(new File(["x,y\\n1,2\\n"], "table.csv", {type: "text/csv"}));
            return t; }"""
    )
    page.get_by_test_id("message-input").dispatch_event("drop", {"dataTransfer": dropped})
    expect(page.locator('[data-testid=file-item][data-path="table.csv"]')).to_be_visible()
    expect(page.get_by_test_id("message-input")).to_have_value(
        "Look at this:\nAttached: `dot.png`\nAttached: `table.csv`"
    )


def test_a_file_too_large_is_refused_under_the_composer_and_nothing_is_written(page, app):
    sign_up(page, app.base_url)
    new_session(page)
    page.get_by_test_id("composer-attach-files").set_input_files(
        {"name": "huge.bin", "mimeType": "application/octet-stream", "buffer": b"\x00" * 300_000}
    )
    status = page.get_by_test_id("composer-attach-status")
    expect(status).to_contain_text("a workspace file may hold at most 262,144 bytes")
    expect(status).not_to_contain_text("WORKSPACE_MAX_FILE_BYTES")  # the operator's name
    expect(status).to_contain_text("Nothing was attached")
    expect(page.get_by_test_id("files-empty")).to_be_visible()
    expect(page.get_by_test_id("message-input")).to_have_value("")
