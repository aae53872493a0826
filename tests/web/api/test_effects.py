"""GET /api/v1/sessions/{id}/effects/: the session's effects ledger, oldest first, in the
contract's fields, paginated like every list; another user's session and an unknown one are
404."""

from __future__ import annotations

import pytest

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import LedgerEntry
from tests.conftest import ask, say
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

pytestmark = pytest.mark.django_db(transaction=True)

FIELDS = {"id", "branch", "turn", "tool_name", "tool_args", "tool_result", "status", "created_at"}


@pytest.fixture
def called(fake_llm, session, branch, settings):
    """Alice's session: a call that ran, rewound away, then a call to an unknown tool."""
    settings.AGENT_TOOLS = ["tests.agents.custom_tools.send_message"]
    say(branch, "hello", "hi")
    start = checkpoint_create(branch=branch, name="start")
    fake_llm.queue(
        ToolCalls([ToolCall("send_message", {"to": "bob", "text": "hi"})]), Reply("Sent.")
    )
    first = ask(session, "send")
    checkpoint_restore(checkpoint=start, mode="rewind")
    fake_llm.queue(ToolCalls([ToolCall("no_such_tool", {})]), Reply("Sorry."))
    second = ask(session, "again")
    assert (first.status, second.status) == ("done", "done")
    return session, branch, first, second


def test_the_ledger_lists_every_call_oldest_first_in_the_contracts_fields(api, called):
    session, branch, first, second = called
    response = api.get(f"/api/v1/sessions/{session.pk}/effects/")
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], body["next"], body["previous"]) == (2, None, None)
    rows = body["results"]
    assert all(set(row) == FIELDS for row in rows)
    ids = list(LedgerEntry.objects.order_by("id").values_list("id", flat=True))
    assert [row["id"] for row in rows] == ids
    assert [{k: v for k, v in row.items() if k not in ("id", "created_at")} for row in rows] == [
        {
            "branch": branch.pk,
            "turn": first.pk,
            "tool_name": "send_message",
            "tool_args": {"to": "bob", "text": "hi"},
            "tool_result": "sent to bob",
            "status": "ran",
        },
        {
            "branch": branch.pk,
            "turn": second.pk,
            "tool_name": "no_such_tool",
            "tool_args": None,  # agno keeps no arguments for an unknown tool
            "tool_result": rows[1]["tool_result"],
            "status": "failed",
        },
    ]
    assert rows[0]["created_at"].endswith("Z")
    assert rows[0]["created_at"] <= rows[1]["created_at"]


def test_the_ledger_is_paginated(api, called):
    session = called[0]
    page = api.get(f"/api/v1/sessions/{session.pk}/effects/?limit=1&offset=1").json()
    assert page["count"] == 2
    assert [row["tool_name"] for row in page["results"]] == ["no_such_tool"]
    assert page["next"] is None
    assert page["previous"] is not None


def test_a_session_without_external_calls_has_an_empty_ledger(api, session):
    response = api.get(f"/api/v1/sessions/{session.pk}/effects/")
    assert response.status_code == 200
    assert response.json() == {"count": 0, "next": None, "previous": None, "results": []}


def test_bob_gets_404_on_alices_ledger(bob_api, called):
    response = bob_api.get(f"/api/v1/sessions/{called[0].pk}/effects/")
    assert response.status_code == 404
    assert set(response.json()) == {"detail"}


def test_an_unknown_session_is_404(api, session):
    response = api.get(f"/api/v1/sessions/{session.pk + 1000}/effects/")
    assert response.status_code == 404
    assert set(response.json()) == {"detail"}
