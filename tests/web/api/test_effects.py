"""GET /api/v1/sessions/{id}/effects/: the session's effects ledger, oldest first, in the
contract's fields, paginated like every list; another user's session and an unknown one are
404."""

from __future__ import annotations

import pytest

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import LedgerEntry, Session
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


def _without(row: dict, *keys: str) -> dict:
    return {k: v for k, v in row.items() if k not in keys}


def test_an_export_and_import_through_the_api_keeps_every_entry(api, bob_api, called):
    """Bob imports alice's export (she sent him the file): his copy has every entry of her
    ledger, on his copy's branch, with no turn (turns do not travel); hers is unchanged and
    still not his to read."""
    session = called[0]
    mine = api.get(f"/api/v1/sessions/{session.pk}/effects/").json()["results"]
    document = api.get(f"/api/v1/sessions/{session.pk}/export/").json()
    assert [e["id"] for e in document["effects"]] == [row["id"] for row in mine]
    response = bob_api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 201
    copy = response.json()
    his = bob_api.get(f"/api/v1/sessions/{copy['id']}/effects/").json()["results"]
    assert [_without(row, "id", "branch", "turn") for row in his] == [
        _without(row, "id", "branch", "turn") for row in mine
    ]
    assert {(row["branch"], row["turn"]) for row in his} == {(copy["current_branch"], None)}
    assert api.get(f"/api/v1/sessions/{copy['id']}/effects/").status_code == 404
    assert bob_api.get(f"/api/v1/sessions/{session.pk}/effects/").status_code == 404
    assert api.get(f"/api/v1/sessions/{session.pk}/effects/").json()["results"] == mine


@pytest.mark.parametrize(
    ("field", "value", "detail"),
    [
        ("status", "happened", "status"),
        ("position", "2", "position"),
        ("tool_result", "r" * 4001, "limit is 4000"),
        ("branch", 987654, "branch 987654, which is not in the document"),
    ],
)
def test_an_import_with_a_malformed_entry_is_400_naming_it_and_imports_nothing(
    api, called, field, value, detail
):
    session = called[0]
    document = api.get(f"/api/v1/sessions/{session.pk}/export/").json()
    entry = document["effects"][1]
    entry[field] = value
    sessions = Session.objects.count()
    entries = LedgerEntry.objects.count()
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 400
    assert f"effects entry 1 (id {entry['id']})" in response.json()["detail"]
    assert detail in response.json()["detail"]
    assert (Session.objects.count(), LedgerEntry.objects.count()) == (sessions, entries)
