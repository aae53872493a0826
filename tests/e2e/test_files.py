"""The Files panel in Chromium: a file written through the API appears in the open page at once
(without losing what the reader had open or typed), opens highlighted, and is deleted from the
page; on a phone-sized screen the panel is inside the drawer and fits it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import expect

from .conftest import new_session, sign_up

pytestmark = pytest.mark.e2e


def _api(app, key: str, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(  # noqa: S310 - the test's own local server
        f"{app.base_url}/api/v1{path}",
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "text/plain; charset=utf-8"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_a_file_written_through_the_api_shows_live_opens_and_is_deleted_from_the_page(
    page, app, app_settings
):
    username = sign_up(page, app.base_url)
    session = new_session(page)
    key = app.manage(app_settings, "createapikey", username).strip().splitlines()[-1]
    expect(page.get_by_test_id("files-empty")).to_be_visible()
    # The reader has started an upload: a live update must not undo it.
    page.get_by_test_id("upload-folder").fill("drafts/half")

    code = "def hello():\n    return '<b>hi</b>'\n"
    status, body = _api(app, key, "PUT", f"/sessions/{session}/files/notes/hello.py", code.encode())
    assert status == 201, body
    item = page.locator('[data-testid=file-item][data-path="notes/hello.py"]')
    expect(item).to_be_visible()
    expect(page.get_by_test_id("files-count")).to_have_text("1")
    expect(page.get_by_test_id("upload-folder")).to_have_value("drafts/half")

    item.get_by_test_id("file-open-link").click()
    opened = page.get_by_test_id("file-open")
    expect(opened).to_have_attribute("data-path", "notes/hello.py")
    content = page.get_by_test_id("file-content")
    expect(content).to_have_text(code.rstrip("\n") + "\n")
    expect(content.locator("span.k").first).to_have_text("def")  # highlighted by Pygments
    expect(content.locator("b")).to_have_count(0)  # the file's markup is text

    # Another write (the agent's, say) updates the tree; the open file stays open.
    status, _ = _api(app, key, "PUT", f"/sessions/{session}/files/notes/more.md", b"# More\n")
    assert status == 201
    expect(page.locator('[data-testid=file-item][data-path="notes/more.md"]')).to_be_visible()
    expect(page.get_by_test_id("files-count")).to_have_text("2")
    expect(opened).to_be_visible()

    # The open file itself changed elsewhere: the view says so, and shows the new version asked.
    newer = "def hello():\n    return 'newer'\n"
    status, _ = _api(app, key, "PUT", f"/sessions/{session}/files/notes/hello.py", newer.encode())
    assert status == 200
    expect(page.get_by_test_id("file-stale")).to_contain_text("changed")
    page.get_by_test_id("file-reload").click()
    expect(content).to_have_text(newer)
    expect(page.get_by_test_id("file-stale")).to_have_count(0)

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("file-delete").click()
    expect(page.get_by_test_id("file-gone")).to_contain_text("notes/hello.py")
    expect(item).to_have_count(0)
    expect(page.get_by_test_id("files-count")).to_have_text("1")
    status, _ = _api(app, key, "GET", f"/sessions/{session}/files/notes/hello.py")
    assert status == 404
    status, listed = _api(app, key, "GET", f"/sessions/{session}/files/")
    assert [f["path"] for f in json.loads(listed)["results"]] == ["notes/more.md"]


def test_on_a_phone_the_files_panel_is_in_the_drawer_and_fits_it(contexts, app):
    page = contexts.new(color_scheme="dark").new_page()
    sign_up(page, app.base_url)
    new_session(page)
    page.set_viewport_size({"width": 390, "height": 800})
    panel = page.get_by_test_id("files-panel")
    expect(panel).to_be_hidden()  # the drawer is closed
    page.get_by_test_id("toggle-panel").click()
    expect(page.get_by_test_id("files-upload")).to_be_visible()
    page.get_by_test_id("files-upload").scroll_into_view_if_needed()
    box = panel.bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= 390
    # Dark theme: the panel's text is light on a dark panel.
    colour = page.get_by_test_id("files-empty").evaluate("e => getComputedStyle(e).color")
    assert colour != "rgb(0, 0, 0)"
