"""The share links' API: POST /branches/{id}/share/, GET /shares/, DELETE /shares/{id}/."""

from __future__ import annotations

import pytest

from checkpoints.services import checkpoint_create
from sessions_app.selectors import current_branch
from sessions_app.services import session_create
from sharing.models import ShareLink
from tests.conftest import say

pytestmark = pytest.mark.django_db


def test_a_link_is_made_with_its_absolute_address(api, branch):
    say(branch, "q", "a")
    response = api.post(f"/api/v1/branches/{branch.pk}/share/", {}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) >= {"id", "url", "branch", "message_count", "created_at"}
    assert body["branch"] == branch.pk
    assert body["message_count"] == 2
    assert body["url"].startswith("http://testserver/s/")
    page = api.get(body["url"].removeprefix("http://testserver"))
    assert page.status_code == 200
    assert b"Shared conversation" in page.content


def test_a_link_up_to_a_checkpoint(api, branch):
    say(branch, "q", "a")
    cp = checkpoint_create(branch=branch, name="cp")
    say(branch, "later")
    response = api.post(
        f"/api/v1/branches/{branch.pk}/share/", {"checkpoint": cp.pk}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["message_count"] == 2
    assert response.json()["checkpoint"] == cp.pk


def test_a_checkpoint_outside_the_branch_history_is_a_400(api, alice, branch):
    other = current_branch(session_create(owner=alice, name="other"))
    cp = checkpoint_create(branch=other, name="elsewhere")
    response = api.post(
        f"/api/v1/branches/{branch.pk}/share/", {"checkpoint": cp.pk}, format="json"
    )
    assert response.status_code == 400
    assert "checkpoint" in response.json()["detail"]
    assert not ShareLink.objects.exists()


@pytest.mark.parametrize(
    "body",
    [{"checkpoint": "abc"}, {"checkpoint": 0}, {"checkpoint": -1}, {"checkpoint": 2**64},
     {"checkpoint": [1]}, {"nope": 1}, [], "x"],
)  # fmt: skip
def test_bad_input_is_a_400_and_writes_nothing(api, branch, body):
    response = api.post(f"/api/v1/branches/{branch.pk}/share/", body, format="json")
    assert response.status_code == 400
    assert response.json()["detail"]
    assert not ShareLink.objects.exists()


def test_bob_gets_404_for_alices_branch_checkpoint_and_link(api, bob_api, bob, branch):
    say(branch, "alice's secret")
    cp = checkpoint_create(branch=branch, name="cp")
    assert (
        bob_api.post(f"/api/v1/branches/{branch.pk}/share/", {}, format="json").status_code == 404
    )
    bobs = current_branch(session_create(owner=bob, name="bob's"))
    mixed = bob_api.post(f"/api/v1/branches/{bobs.pk}/share/", {"checkpoint": cp.pk}, format="json")
    assert mixed.status_code == 404
    made = api.post(f"/api/v1/branches/{branch.pk}/share/", {}, format="json").json()
    assert bob_api.delete(f"/api/v1/shares/{made['id']}/").status_code == 404
    assert bob_api.get("/api/v1/shares/").json()["count"] == 0
    assert ShareLink.objects.filter(pk=made["id"]).exists()


def test_the_list_is_paginated_with_views_and_addresses(api, branch):
    made = [
        api.post(f"/api/v1/branches/{branch.pk}/share/", {}, format="json").json() for _ in range(3)
    ]
    api.get(made[0]["url"].removeprefix("http://testserver"))
    listed = api.get("/api/v1/shares/?limit=2").json()
    assert listed["count"] == 3
    assert len(listed["results"]) == 2
    assert listed["next"]
    everything = api.get("/api/v1/shares/").json()["results"]
    assert [r["id"] for r in everything] == [m["id"] for m in reversed(made)]
    by_id = {r["id"]: r for r in everything}
    assert by_id[made[0]["id"]]["views"] == 1
    assert by_id[made[0]["id"]]["last_viewed_at"]
    assert by_id[made[0]["id"]]["url"] == made[0]["url"]
    assert api.get("/api/v1/shares/?limit=x").status_code == 400


def test_deleting_a_link_makes_its_address_a_404_at_once(api, branch):
    made = api.post(f"/api/v1/branches/{branch.pk}/share/", {}, format="json").json()
    path = made["url"].removeprefix("http://testserver")
    assert api.get(path).status_code == 200
    assert api.delete(f"/api/v1/shares/{made['id']}/").status_code == 204
    assert api.get(path).status_code == 404
    assert api.delete(f"/api/v1/shares/{made['id']}/").status_code == 404


def test_the_limit_of_links_is_a_409(api, branch, settings):
    settings.ROLLBACK_MAX_SHARES_PER_USER = 1
    assert api.post(f"/api/v1/branches/{branch.pk}/share/", {}, format="json").status_code == 201
    refused = api.post(f"/api/v1/branches/{branch.pk}/share/", {}, format="json")
    assert refused.status_code == 409
    assert "the most one account may keep is 1" in refused.json()["detail"]


def test_anonymous_requests_are_401(client, branch):
    assert client.post(f"/api/v1/branches/{branch.pk}/share/").status_code == 401
    assert client.get("/api/v1/shares/").status_code == 401
