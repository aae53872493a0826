"""What reading one session through the API costs the database: one statement, the session with
its branch count and current branch, scoped to the user (the API key comes from the cache)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.services import session_create
from tests.web.api.conftest import bearer_client

pytestmark = pytest.mark.django_db


def test_a_session_is_read_in_one_statement(alice, bob):
    api = bearer_client(alice)
    sid = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()["id"]
    theirs = session_create(owner=bob, name="theirs").pk
    api.get(f"/api/v1/sessions/{sid}/")  # the key into the cache
    with CaptureQueriesContext(connection) as ctx:
        mine = api.get(f"/api/v1/sessions/{sid}/")
    assert mine.status_code == 200
    assert mine.json()["branch_count"] == 1
    assert mine.json()["current_branch"] is not None
    assert len(ctx.captured_queries) == 1, [q["sql"][:120] for q in ctx.captured_queries]
    with CaptureQueriesContext(connection) as ctx:
        other = api.get(f"/api/v1/sessions/{theirs}/")
    assert other.status_code == 404
    assert len(ctx.captured_queries) == 1
