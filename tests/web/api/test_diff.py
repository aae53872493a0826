"""GET /api/v1/sessions/{id}/diff/?from=&to=: two points of a session compared, in the contract's
shape; refs that are missing or do not parse are a 400 with a detail, another session's or
another user's a 404, no credentials a 401."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import Branch
from sessions_app.services import branch_set_state, session_create
from tests.conftest import say
from workspace.services import file_write

pytestmark = pytest.mark.django_db


def _url(session) -> str:
    return f"/api/v1/sessions/{session.pk}/diff/"


@pytest.fixture
def restored(session, branch):
    """Alice's session: main with 4 messages, a checkpoint, 2 more on main; a branch restored
    from the checkpoint with 3 of its own, another state and a file changed."""
    say(branch, "q1", "a1", "q2", "a2")
    branch_set_state(branch=branch, session_state={"topic": "python", "todos": []})
    file_write(branch=branch, path="plan.md", content="step 1\nstep 2\n")
    cp = checkpoint_create(branch=branch, name="before")
    say(branch, "old question", "old answer")
    new = checkpoint_restore(checkpoint=cp, mode="branch").branch
    say(new, "new question", "new answer", "again")
    branch_set_state(branch=new, session_state={"topic": "rust", "level": 1})
    file_write(branch=new, path="plan.md", content="step 1\nstep two\n")
    file_write(branch=new, path="src/<script>.py", content="x = 1\n")
    branch.refresh_from_db()
    new.refresh_from_db()
    return {"main": branch, "new": new, "cp": cp}


def test_diff_of_a_restored_branch_and_its_parent_has_the_contract_shape(api, session, restored):
    main, new = restored["main"], restored["new"]
    response = api.get(_url(session), {"from": f"branch:{main.pk}", "to": f"branch:{new.pk}"})
    assert response.status_code == 200
    body = response.json()
    assert set(body) >= {"common", "from", "to", "state", "files"}
    assert body["common"] == 4
    assert [m["content"] for m in body["from"]] == ["old question", "old answer"]
    assert [m["content"] for m in body["to"]] == ["new question", "new answer", "again"]
    assert (body["from_count"], body["to_count"]) == (2, 3)
    first = body["to"][0]
    assert set(first) >= {"id", "role", "content", "tool_name", "effect", "created_at"}
    assert first["position"] == 4
    assert body["state"] == {
        "added": {"level": 1},
        "removed": {"todos": []},
        "changed": {"topic": {"from": "python", "to": "rust"}},
    }
    files = body["files"]
    assert [f["path"] for f in files["added"]] == ["src/<script>.py"]
    assert files["removed"] == []
    (plan,) = files["changed"]
    assert plan["path"] == "plan.md"
    assert "-step 2\n+step two\n" in plan["diff"]
    assert plan["note"] is None


def test_diff_between_a_checkpoint_and_its_branch(api, session, restored):
    main, cp = restored["main"], restored["cp"]
    body = api.get(_url(session), {"from": f"checkpoint:{cp.pk}", "to": f"branch:{main.pk}"})
    body = body.json()
    assert body["common"] == 4
    assert body["from"] == []
    assert [m["content"] for m in body["to"]] == ["old question", "old answer"]


def test_identical_points_differ_in_nothing(api, session, restored):
    main = restored["main"]
    ref = f"branch:{main.pk}"
    body = api.get(_url(session), {"from": ref, "to": ref}).json()
    assert body["common"] == main.message_count
    assert (body["from"], body["to"]) == ([], [])
    assert body["state"] == {"added": {}, "removed": {}, "changed": {}}
    assert body["files"] == {"added": [], "removed": [], "changed": []}


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"from": "branch:1"},
        {"to": "branch:1"},
        {"from": "", "to": ""},
        {"from": "main", "to": "branch:1"},
        {"from": "branch:1", "to": "checkpoint:x"},
        {"from": "branch:0", "to": "branch:1"},
        {"from": "turn:1", "to": "branch:1"},
        {"from": "branch:1", "to": "checkpoint:99999999999999999999999999"},
        {"from": "branch:\x00", "to": "branch:1"},
    ],
)
def test_refs_missing_or_that_do_not_parse_are_a_400_with_a_detail(api, session, params):
    response = api.get(_url(session), params)
    assert response.status_code == 400
    assert "branch:<id> or checkpoint:<id>" in response.json()["detail"]


def test_a_branch_or_checkpoint_of_another_session_of_the_same_user_is_a_404(
    api, alice, session, restored
):
    other = session_create(owner=alice, name="other")
    other_branch = Branch.objects.get(session=other, is_current=True)
    other_cp = checkpoint_create(branch=other_branch, name="there")
    main = f"branch:{restored['main'].pk}"
    for ref in (f"branch:{other_branch.pk}", f"checkpoint:{other_cp.pk}"):
        response = api.get(_url(session), {"from": main, "to": ref})
        assert response.status_code == 404
        assert "detail" in response.json()


def test_bob_is_refused_alices_session_and_points(bob_api, bob, session, restored):
    main, new = restored["main"], restored["new"]
    refs = {"from": f"branch:{main.pk}", "to": f"branch:{new.pk}"}
    response = bob_api.get(_url(session), refs)
    assert response.status_code == 404
    assert response.json() == {"detail": "Session not found."}
    bobs = session_create(owner=bob, name="bob's own")
    response = bob_api.get(_url(bobs), refs)
    assert response.status_code == 404
    assert "alice" not in response.content.decode()


def test_without_credentials_the_diff_is_a_401(session, restored):
    main = f"branch:{restored['main'].pk}"
    response = APIClient().get(_url(session), {"from": main, "to": main})
    assert response.status_code == 401
    assert "detail" in response.json()
