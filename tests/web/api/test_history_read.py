"""The API's history read: rows serialised straight from the cursor, in exactly the shape the
message serializer gives, in one query for the history whatever its length."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.selectors import branch_history
from sessions_app.services import message_append
from tests.conftest import grow, say
from web.api.serializers import MessageOut

pytestmark = pytest.mark.django_db


def _mixed_history(branch):
    """A history over two generations with every kind of value: tool calls, JSON arguments,
    nested metadata, text that is not ASCII."""
    say(branch, "a", "b")
    message_append(
        branch=branch,
        role="assistant",
        content="",
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "calculate"}}],
        metadata={"model": "m", "nested": {"é": [1, 2.5, None, True]}},
    )
    message_append(
        branch=branch,
        role="tool",
        tool_name="calculate",
        tool_args={"expression": "6*7"},
        tool_result="42",
        tool_call_id="c1",
    )
    checkpoint = checkpoint_create(branch=branch, name="four")
    say(branch, "discarded")
    child = checkpoint_restore(checkpoint=checkpoint).branch
    say(child, "x — ü", "y")
    child.refresh_from_db()
    return child


def _as_the_serializer_gives_it(branch):
    """The reference: each message built as a model instance and run through MessageOut, then
    through JSON as the API renders it."""
    data = MessageOut(branch_history(branch), many=True).data
    return json.loads(json.dumps({"results": data}, default=str))["results"]


def test_history_page_is_exactly_the_serializers_shape(api, session, branch):
    child = _mixed_history(branch)
    expected = _as_the_serializer_gives_it(child)
    response = api.get(f"/api/v1/sessions/{session.pk}/messages/?branch={child.pk}")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 6
    assert body["results"] == expected
    assert [list(row) for row in body["results"]] == [list(row) for row in expected]
    assert [row["content"] for row in body["results"]][-2:] == ["x — ü", "y"]
    assert body["results"][3]["tool_args"] == {"expression": "6*7"}


def test_history_pages_keep_order_and_pagination(api, session, branch):
    child = _mixed_history(branch)
    expected = _as_the_serializer_gives_it(child)
    url = f"/api/v1/sessions/{session.pk}/messages/?branch={child.pk}"
    first = api.get(url + "&limit=4").json()
    second = api.get(url + "&limit=4&offset=4").json()
    assert first["results"] == expected[:4]
    assert second["results"] == expected[4:]
    assert first["previous"] is None
    assert second["next"] is None
    assert first["next"].endswith("offset=4")


def test_a_page_and_the_whole_history_cost_the_same_queries(api, session, branch):
    grow(branch, 3_000)
    url = f"/api/v1/sessions/{session.pk}/messages/"
    api.get(url + "?limit=1")  # the key's first use is recorded once (last_used_at)
    with CaptureQueriesContext(connection) as page:
        one = api.get(url + "?limit=10").json()
    with CaptureQueriesContext(connection) as whole:
        parts = [api.get(url + f"?limit=1000&offset={o}").json() for o in (0, 1000, 2000)]
    # The session, its current branch, the history: three, whatever the length (the API key,
    # seen by the request before, comes from the cache: accounts.key_cache).
    assert len(page.captured_queries) == 3
    assert len(whole.captured_queries) == 3 * 3
    assert [m["content"] for m in one["results"]] == [f"message {i}" for i in range(10)]
    rows = [m for part in parts for m in part["results"]]
    assert [m["position"] for m in rows] == list(range(3_000))
