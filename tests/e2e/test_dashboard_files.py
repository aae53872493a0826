"""The operator's dashboard counts a user's workspace files in their storage (issue 39: a user
with 1 MB of files was listed at 2.3 KB), in Chromium at 1366 and 390 px, light and dark, with
axe. An app of its own: the dashboard's figures are cached for a minute in the served process,
so the user is made before any page of it is read."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from .conftest import Services, app_env, prepared, sign_in_as_staff
from .test_accessibility import violations
from .test_third_round import IDS, LOOKS

pytestmark = pytest.mark.e2e

OWNER = f"files{uuid.uuid4().hex[:10]}"
SEED = f"""
from accounts.models import User
from sessions_app.models import Branch
from sessions_app.services import session_create
from workspace.services import file_write
user = User.objects.create_user({OWNER!r}, password="e2e-unused-Passw0rd-7")
branch = Branch.objects.get(session=session_create(owner=user, name="Files only"))
for i in range(8):
    file_write(branch=branch, path=f"part{{i}}.txt", content=chr(97 + i) * 250_000)
"""


@pytest.fixture(scope="module")
def files_env(model_server, tmp_path_factory) -> dict[str, str]:
    return app_env(tmp_path_factory.mktemp("dashboard-var"), model_server.base_url)


@pytest.fixture(scope="module")
def files_app(files_env, tmp_path_factory) -> Iterator[Services]:
    """The app, with a user holding 2,000,000 bytes of files and no message."""
    with prepared(files_env, tmp_path_factory.mktemp("dashboard-logs")) as services:
        services.manage(files_env, "shell", "-c", SEED)
        services.start_daphne(files_env)
        yield services


@pytest.mark.parametrize(("width", "scheme"), LOOKS, ids=IDS)
def test_the_dashboard_counts_a_users_files_in_their_storage(
    contexts, files_app, files_env, width, scheme
):
    page = contexts.new(viewport={"width": width, "height": 844}).new_page()
    page.emulate_media(color_scheme=scheme)
    sign_in_as_staff(page, files_app, files_env)
    page.goto(f"{files_app.base_url}/admin/dashboard/")
    row = page.locator("tr", has=page.get_by_role("link", name=OWNER, exact=True))
    expect(row.get_by_test_id("user-files")).to_contain_text("1.9\xa0MB of ")
    expect(row.locator("td").last).to_have_text("1.9\xa0MB")  # storage: files and messages
    assert violations(page) == []
