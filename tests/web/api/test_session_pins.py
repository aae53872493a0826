"""The API's side of pins, Markdown export and archived sessions: `pinned` on a session (shown,
set by PATCH, filtered by `?pinned=`), `GET /sessions/{id}/export/?format=markdown`, and a turn
posted in an archived session bringing it back."""

from __future__ import annotations

import pytest

from checkpoints.services import checkpoint_create
from sessions_app.models import Session
from sessions_app.services import message_append, session_create, session_update

pytestmark = pytest.mark.django_db


def test_a_session_shows_whether_it_is_pinned_and_patch_pins_and_unpins_it(api, session):
    url = f"/api/v1/sessions/{session.pk}/"
    assert api.get(url).json()["pinned"] is False
    answer = api.patch(url, {"pinned": True}, format="json")
    assert answer.status_code == 200
    assert answer.json()["pinned"] is True
    session.refresh_from_db()
    pinned_at = session.pinned_at
    assert pinned_at is not None
    # Pinning a pinned session again keeps the time it was pinned (its place in the list).
    api.patch(url, {"pinned": True}, format="json")
    session.refresh_from_db()
    assert session.pinned_at == pinned_at
    assert api.patch(url, {"pinned": False}, format="json").json()["pinned"] is False
    session.refresh_from_db()
    assert session.pinned_at is None


@pytest.mark.parametrize("value", ["yes", 1, None, [], {"a": 1}, "true"])
def test_a_pinned_that_is_not_a_boolean_is_a_400_and_nothing_changes(api, session, value):
    answer = api.patch(f"/api/v1/sessions/{session.pk}/", {"pinned": value}, format="json")
    assert answer.status_code == 400
    assert "pinned" in answer.json()["detail"].lower()
    session.refresh_from_db()
    assert session.pinned_at is None


def test_pinning_another_users_session_is_a_404_and_leaves_it(bob_api, session):
    answer = bob_api.patch(f"/api/v1/sessions/{session.pk}/", {"pinned": True}, format="json")
    assert answer.status_code == 404
    session.refresh_from_db()
    assert session.pinned_at is None


def test_the_list_filters_by_pinned(api, alice, session):
    other = session_create(owner=alice, name="Other")
    session_update(session=other, pinned=True)

    def names(flag: str) -> list[str]:
        listed = api.get(f"/api/v1/sessions/?pinned={flag}").json()["results"]
        return [s["name"] for s in listed]

    assert names("true") == ["Other"]
    assert names("false") == ["Python basics"]
    assert len(api.get("/api/v1/sessions/").json()["results"]) == 2
    answer = api.get("/api/v1/sessions/?pinned=maybe")
    assert answer.status_code == 400
    assert "pinned" in answer.json()["detail"]


def test_export_and_import_keep_the_pin(api, session):
    session_update(session=session, pinned=True)
    document = api.get(f"/api/v1/sessions/{session.pk}/export/").json()
    assert document["session"]["pinned_at"] is not None
    # Beside its original, the copy is not pinned (two identical pinned rows otherwise) ...
    made = api.post("/api/v1/sessions/import/", document, format="json")
    assert made.status_code == 201
    assert made.json()["pinned"] is False
    # ... and a conversation moved where its name is free keeps its pin.
    api.delete(f"/api/v1/sessions/{made.json()['id']}/")
    api.patch(f"/api/v1/sessions/{session.pk}/", {"name": "the original"}, format="json")
    made = api.post("/api/v1/sessions/import/", document, format="json")
    assert made.status_code == 201
    assert made.json()["pinned"] is True
    session_update(session=session, pinned=False)
    document = api.get(f"/api/v1/sessions/{session.pk}/export/").json()
    assert document["session"]["pinned_at"] is None
    assert api.post("/api/v1/sessions/import/", document, format="json").json()["pinned"] is False


def test_the_markdown_export_is_the_current_branch_as_text_markdown(api, session, branch):
    message_append(branch=branch, role="user", content="# comment\n    def f(*args): ```x```")
    message_append(branch=branch, role="assistant", content="Here is **bold**.")
    checkpoint_create(branch=branch, name="after the answer")
    message_append(
        branch=branch, role="tool", tool_name="calculate", tool_args={"expression": "2+2"},
        tool_result="4",
    )  # fmt: skip
    answer = api.get(f"/api/v1/sessions/{session.pk}/export/?format=markdown")
    assert answer.status_code == 200
    assert answer["Content-Type"] == "text/markdown; charset=utf-8"
    assert answer["Content-Disposition"].endswith('.md"')
    text = answer.content.decode()
    assert text.startswith("# Python basics\n")
    for heading in ("## User", "## Assistant", "## Tool"):
        assert heading in text
    # The user's text exactly as typed, in a fence its own backticks cannot close.
    assert "````text\n# comment\n    def f(*args): ```x```\n````" in text
    assert "Here is **bold**." in text
    assert "Checkpoint **after the answer** (after 2 messages" in text
    assert text.index("Here is **bold**.") < text.index("after the answer") < text.index("## Tool")
    assert '- `calculate` with `{"expression": "2+2"}` → `4`' in text
    # JSON stays the default.
    assert api.get(f"/api/v1/sessions/{session.pk}/export/").json()["format"] == "rollback.session"
    assert api.get(f"/api/v1/sessions/{session.pk}/export/?format=json").status_code == 200


def test_an_unknown_export_format_is_a_400_and_another_users_session_a_404(api, bob_api, session):
    answer = api.get(f"/api/v1/sessions/{session.pk}/export/?format=pdf")
    assert answer.status_code == 400
    assert answer.json() == {"detail": "format must be json or markdown."}
    answer = bob_api.get(f"/api/v1/sessions/{session.pk}/export/?format=markdown")
    assert answer.status_code == 404
    assert "detail" in answer.json()


def test_a_turn_posted_in_an_archived_session_brings_it_back(api, session, fake_llm, inline_turns):
    session_update(session=session, archived=True)
    answer = api.post(f"/api/v1/sessions/{session.pk}/turns/", {"message": "hi"}, format="json")
    assert answer.status_code in (201, 202)
    session.refresh_from_db()
    assert session.archived_at is None
    listed = [s["id"] for s in api.get("/api/v1/sessions/").json()["results"]]
    assert listed == [session.pk]
    assert Session.objects.filter(archived_at__isnull=False).count() == 0
