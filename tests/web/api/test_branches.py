"""PATCH /api/v1/branches/{id}/ (a branch's name) and the `name` every branch answer carries."""

from __future__ import annotations

import pytest

from checkpoints.services import checkpoint_create
from sessions_app.models import Branch
from sessions_app.services import branch_fork
from tests.conftest import say

pytestmark = pytest.mark.django_db


@pytest.fixture
def talked(branch):
    say(branch, "one", "reply one", "two", "reply two")
    branch.refresh_from_db()
    return branch


def test_renaming_a_branch_answers_the_branch_with_its_name(api, talked):
    response = api.patch(f"/api/v1/branches/{talked.pk}/", {"name": " plan A "}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["id"] == talked.pk
    assert body["name"] == "plan A"
    assert set(body) >= {"id", "session", "name", "parent", "forked_from", "is_current"}
    assert set(body) >= {"message_count", "checkpoint_count", "created_at"}
    talked.refresh_from_db()
    assert talked.name == "plan A"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"name": ""}, "cannot be empty"),
        ({"name": "   "}, "cannot be empty"),
        ({"name": "x" * 201}, "201 characters long; the limit is 200"),
        ({"name": 5}, "name"),
        ({}, "name"),
        ({"name": "ok", "color": "red"}, "color"),
    ],
)
def test_a_bad_name_is_a_400_that_says_why_and_changes_nothing(api, talked, body, says):
    api.patch(f"/api/v1/branches/{talked.pk}/", {"name": "kept"}, format="json")
    response = api.patch(f"/api/v1/branches/{talked.pk}/", body, format="json")
    assert response.status_code == 400
    assert says in response.json()["detail"]
    talked.refresh_from_db()
    assert talked.name == "kept"


def test_bob_cannot_rename_alices_branch(bob_api, talked):
    response = bob_api.patch(f"/api/v1/branches/{talked.pk}/", {"name": "mine"}, format="json")
    assert response.status_code == 404
    talked.refresh_from_db()
    assert talked.name == ""


def test_the_branch_list_names_every_branch_as_the_pages_do(api, session, talked):
    mark = checkpoint_create(branch=talked, name="start")
    edit = branch_fork(branch=talked, position=2, metadata={"edited_message": 3})
    restored = branch_fork(branch=talked, position=4, forked_from_id=mark.pk)
    api.patch(f"/api/v1/branches/{restored.pk}/", {"name": "my restore"}, format="json")
    rows = api.get(f"/api/v1/sessions/{session.pk}/branches/").json()["results"]
    assert {r["id"]: r["name"] for r in rows} == {
        talked.pk: "main",
        edit.pk: "edit of message 3",
        restored.pk: "my restore",
    }
    activated = api.post(f"/api/v1/branches/{edit.pk}/activate/").json()
    assert activated["name"] == "edit of message 3"


def test_listing_branches_takes_the_same_queries_for_many_branches(
    api, session, talked, django_assert_max_num_queries
):
    for i in range(30):
        branch_fork(branch=talked, position=i % 4, make_current=False)
    assert Branch.objects.filter(session=session).count() == 31
    with django_assert_max_num_queries(8):
        rows = api.get(f"/api/v1/sessions/{session.pk}/branches/?limit=100").json()["results"]
    assert len({r["name"] for r in rows}) == 31  # and every one is told apart
