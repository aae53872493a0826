"""POST /api/v1/turns/{id}/cancel/: Stop through the API (the runner's side is in
tests/agents/test_turns.py)."""

from __future__ import annotations

import pytest

from core.events import listen
from sessions_app.models import Turn
from sessions_app.turns import turn_claim, turn_fail, turn_start

pytestmark = pytest.mark.django_db


def cancel(client, turn_id: int):
    return client.post(f"/api/v1/turns/{turn_id}/cancel/", {}, format="json")


@pytest.fixture
def seen(session):
    events: list[dict] = []
    stop = listen(session.pk, events.append)
    yield events
    stop()


def test_cancelling_a_running_turn_answers_it_cancelled_and_says_so_once(
    api, session, seen, django_capture_on_commit_callbacks
):
    turn = turn_claim(turn_id=turn_start(session=session, message="hi").pk)
    assert turn is not None
    with django_capture_on_commit_callbacks(execute=True):
        response = cancel(api, turn.pk)
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == turn.pk
    assert body["status"] == "cancelled"
    assert body["finish_reason"] == "cancelled"
    assert body["finished_at"] is not None
    assert [e["type"] for e in seen if e["type"] == "turn.cancelled"] == ["turn.cancelled"]
    assert api.get(f"/api/v1/turns/{turn.pk}/").json()["status"] == "cancelled"


def test_cancelling_a_queued_turn_frees_the_session_for_the_next_message(api, session):
    turn = turn_start(session=session, message="hi")
    response = cancel(api, turn.pk)
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert turn_start(session=session, message="next").status == "queued"


def test_cancelling_twice_answers_the_cancelled_turn_and_changes_nothing(
    api, session, seen, django_capture_on_commit_callbacks
):
    turn = turn_start(session=session, message="hi")
    with django_capture_on_commit_callbacks(execute=True):
        first = cancel(api, turn.pk).json()
        second = cancel(api, turn.pk)
    assert second.status_code == 200
    assert second.json() == first
    assert [e["type"] for e in seen].count("turn.cancelled") == 1


@pytest.mark.parametrize("ended", ["done", "failed"])
def test_a_turn_that_already_ended_cannot_be_cancelled(api, session, ended):
    turn = turn_start(session=session, message="hi")
    if ended == "failed":
        turn_fail(turn=turn, error="the model did not answer")
    else:
        Turn.objects.filter(pk=turn.pk).update(status="done")
    response = cancel(api, turn.pk)
    assert response.status_code == 409
    assert "already ended" in response.json()["detail"]
    turn.refresh_from_db()
    assert turn.status == ended


def test_a_finished_turn_has_its_finish_reason_and_a_running_one_none(api, session):
    turn = turn_start(session=session, message="hi")
    assert api.get(f"/api/v1/turns/{turn.pk}/").json()["finish_reason"] is None
    Turn.objects.filter(pk=turn.pk).update(status="done", metadata={"finish_reason": "length"})
    assert api.get(f"/api/v1/turns/{turn.pk}/").json()["finish_reason"] == "length"


def test_bob_cannot_cancel_alices_turn(bob_api, session):
    turn = turn_start(session=session, message="hi")
    response = cancel(bob_api, turn.pk)
    assert response.status_code == 404
    turn.refresh_from_db()
    assert turn.status == "queued"


def test_cancelling_a_missing_turn_is_404(api):
    assert cancel(api, 987654).status_code == 404
