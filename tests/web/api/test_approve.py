"""POST /api/v1/turns/{id}/approve/ and `"wait": true` on a turn that pauses for an approval
(the worker's side is in tests/agents/test_approval.py)."""

from __future__ import annotations

import pytest

from agents.dispatch import drain
from sessions_app.approvals import args_digest
from sessions_app.models import Turn
from sessions_app.turns import turn_start
from tests.agents import approval_tools
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.web.api.conftest import bearer_client

# The turn runs on the embedded pool (another thread) while the requests answer it.
pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = {"to": "bob@example.com", "subject": "hello"}
PENDING = {
    "tool_call_id": "call_mail",
    "tool_name": "send_email",
    "args": EMAIL,
    "call": 1,
    "attempt": 1,
    "args_sha256": args_digest(EMAIL),
    "may_have_run": False,
    "note": None,
}


@pytest.fixture
def email_tool(settings, celery_eager):
    settings.AGENT_TOOLS = ["tests.agents.approval_tools.send_email"]
    settings.API_TURN_WAIT_SECONDS = 60
    approval_tools.SENT.clear()
    yield approval_tools.SENT
    approval_tools.SENT.clear()


def approve(client, turn_id: int, body: object):
    return client.post(f"/api/v1/turns/{turn_id}/approve/", body, format="json")


def paused_turn(api, fake_llm, session_id: int) -> dict:
    """A turn posted with `"wait": true`: answered once it waits for the approval."""
    fake_llm.queue(ToolCalls([ToolCall("send_email", EMAIL, id="call_mail")]))
    fake_llm.queue(Reply("Done."))
    response = api.post(
        f"/api/v1/sessions/{session_id}/turns/",
        {"message": "mail bob", "wait": True},
        format="json",
    )
    assert response.status_code == 202, response.content
    return response.json()


def ended(api, turn_id: int) -> dict:
    """The turn once the pool's worker is done with it (not read meanwhile: SQLite's shared
    in-memory database of the tests locks a table that is being written)."""
    drain()
    return api.get(f"/api/v1/turns/{turn_id}/").json()


def test_wait_answers_when_the_turn_waits_and_an_approval_runs_the_tool(
    api, fake_llm, email_tool, session
):
    turn = paused_turn(api, fake_llm, session.pk)
    assert turn["status"] == "awaiting_approval"
    assert turn["pending_approval"] == PENDING
    assert email_tool == []
    assert api.get(f"/api/v1/turns/{turn['id']}/").json()["pending_approval"] == PENDING

    response = approve(api, turn["id"], {"tool_call_id": "call_mail", "approved": True})
    assert response.status_code == 200
    assert response.json()["id"] == turn["id"]
    assert response.json()["pending_approval"] is None
    assert response.json()["status"] in ("queued", "running", "done")  # its continuation
    done = ended(api, turn["id"])
    assert done["status"] == "done"
    assert done["tools_used"] == ["send_email"]
    assert done["reply"] == "Done."
    assert email_tool == [("bob@example.com", "hello")]
    # The same answer again, after the turn ended: nothing waits, a 409 that says so.
    again = approve(api, turn["id"], {"tool_call_id": "call_mail", "approved": True})
    assert again.status_code == 409
    assert "has ended" in again.json()["detail"]
    assert email_tool == [("bob@example.com", "hello")]


def test_a_refusal_through_the_api_keeps_the_tool_from_running(api, fake_llm, email_tool, session):
    turn = paused_turn(api, fake_llm, session.pk)
    response = approve(api, turn["id"], {"tool_call_id": "call_mail", "approved": False})
    assert response.status_code == 200
    done = ended(api, turn["id"])
    assert done["status"] == "done"
    assert done["tools_used"] == []
    assert email_tool == []
    messages = api.get(f"/api/v1/sessions/{session.pk}/messages/").json()["results"]
    (tool,) = [m for m in messages if m["role"] == "tool"]
    assert "refused" in tool["tool_result"]


def test_during_the_wait_bob_gets_404_bad_bodies_400_a_wrong_call_409_and_a_new_turn_409(
    api, bob, fake_llm, email_tool, session
):
    turn = paused_turn(api, fake_llm, session.pk)
    turn_id = turn["id"]
    bob_api = bearer_client(bob)
    answer = {"tool_call_id": "call_mail", "approved": True}
    assert approve(bob_api, turn_id, answer).status_code == 404
    assert bob_api.get(f"/api/v1/turns/{turn_id}/").status_code == 404
    for body in (
        {},
        {"tool_call_id": "call_mail"},
        {"approved": True},
        {"tool_call_id": "call_mail", "approved": "yes"},
        {"tool_call_id": "call_mail", "approved": 1},
        {"tool_call_id": 7, "approved": True},
        {"tool_call_id": "call_mail", "approved": True, "extra": 1},
        {"tool_call_id": "x" * 201, "approved": True},
        {"tool_call_id": "call_mail", "approved": True, "call": "1"},
        {"tool_call_id": "call_mail", "approved": True, "call": 0},
        {"tool_call_id": "call_mail", "approved": True, "attempt": True},
        {"tool_call_id": "call_mail", "approved": True, "attempt": None},
        ["call_mail", True],
        "approve",
    ):
        response = approve(api, turn_id, body)
        assert response.status_code == 400, (body, response.content)
    wrong = approve(api, turn_id, {"tool_call_id": "call_other", "approved": True})
    assert wrong.status_code == 409
    another = api.post(
        f"/api/v1/sessions/{session.pk}/turns/", {"message": "and also"}, format="json"
    )
    assert another.status_code == 409
    # Nothing of that changed the wait.
    assert api.get(f"/api/v1/turns/{turn_id}/").json()["status"] == "awaiting_approval"
    assert email_tool == []
    assert (
        approve(api, turn_id, {"tool_call_id": "call_mail", "approved": False}).status_code == 200
    )
    assert ended(api, turn_id)["status"] == "done"
    drain()


def test_approving_a_turn_that_waits_for_nothing_is_409(api, session):
    turn = turn_start(session=session, message="hi")
    response = approve(api, turn.pk, {"tool_call_id": "call_mail", "approved": True})
    assert response.status_code == 409
    assert Turn.objects.get(pk=turn.pk).status == "queued"


def test_approving_a_missing_turn_is_404(api):
    assert approve(api, 999999, {"tool_call_id": "c", "approved": True}).status_code == 404


def test_stale_answers_are_409_with_the_reason_and_change_nothing(
    api, fake_llm, email_tool, session
):
    """The contract's 409 for every answer to a call that does not wait now: the same answer
    twice, an answer naming another place or an earlier attempt, an answer after the end."""
    turn = paused_turn(api, fake_llm, session.pk)
    turn_id = turn["id"]
    pending = turn["pending_approval"]
    assert (pending["call"], pending["attempt"]) == (1, 1)
    for body, reason in (
        ({"tool_call_id": "call_mail", "approved": True, "call": 2}, "waits for another call"),
        ({"tool_call_id": "call_mail", "approved": True, "attempt": 2}, "waits for another call"),
        ({"tool_call_id": "call_other", "approved": True, "call": 1}, "waits for another call"),
    ):
        response = approve(api, turn_id, body)
        assert response.status_code == 409, (body, response.content)
        assert reason in response.json()["detail"]
    assert api.get(f"/api/v1/turns/{turn_id}/").json()["status"] == "awaiting_approval"
    # The right answer, naming the call fully: 200. The same again: 409, nothing waits.
    body = {"tool_call_id": "call_mail", "approved": True, "call": 1, "attempt": 1}
    assert approve(api, turn_id, body).status_code == 200
    again = approve(api, turn_id, body)
    assert again.status_code == 409
    assert again.json()["detail"] in (
        "This call was already answered (approved); nothing waits for it any more.",
        "This turn has ended (done): nothing waits for an approval any more.",
    )
    done = ended(api, turn_id)
    assert done["status"] == "done"
    assert email_tool == [("bob@example.com", "hello")]
    late = approve(api, turn_id, {"tool_call_id": "call_mail", "approved": False})
    assert late.status_code == 409
    assert late.json()["detail"] == (
        "This turn has ended (done): nothing waits for an approval any more."
    )
    assert api.get(f"/api/v1/turns/{turn_id}/").json()["tools_used"] == ["send_email"]


def test_an_answer_to_a_call_of_an_attempt_taken_over_is_409(api, bob, session):
    """The turn's continuation (attempt 2) asks for a call with the same id: an answer naming
    attempt 1's call is a 409 and does not answer the new one."""
    from sessions_app.approvals import turn_approve
    from sessions_app.turns import turn_claim
    from tests.agents.approval_tools import pause

    first = turn_claim(turn_id=turn_start(session=session, message="mail bob").pk)
    assert pause(first, "call_mail", EMAIL)
    turn_approve(turn=first, tool_call_id="call_mail", approved=True, resume=False)
    second = turn_claim(turn_id=first.pk)
    assert second.attempts == 2
    assert pause(second, "call_mail", EMAIL)
    stale = {"tool_call_id": "call_mail", "approved": True, "call": 1, "attempt": 1}
    response = approve(api, first.pk, stale)
    assert response.status_code == 409
    assert "attempt 1" in response.json()["detail"]
    assert "call 1 of attempt 2" in response.json()["detail"]
    assert Turn.objects.get(pk=first.pk).status == "awaiting_approval"
    # bob, naming the right call, still gets a 404.
    fresh = {**stale, "attempt": 2}
    assert approve(bearer_client(bob), first.pk, fresh).status_code == 404
    assert approve(api, first.pk, fresh).status_code == 200
