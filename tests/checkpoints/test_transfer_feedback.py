"""A reply's feedback (sessions_app.feedback) in the session export: the document carries it
with its message, an import restores it, on a reply shared by two branches too; a document
whose feedback this app would never store is refused, and nothing is imported."""

from __future__ import annotations

import json

import pytest

from checkpoints.services import checkpoint_create, checkpoint_restore
from checkpoints.transfer import session_export, session_import
from sessions_app.errors import ImportRejected
from sessions_app.feedback import NOTE_MAX_CHARS
from sessions_app.models import Message, Session
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import message_feedback_set
from tests.conftest import say

pytestmark = pytest.mark.django_db


@pytest.fixture
def rated(session, branch):
    say(branch, "q1", "a1", "q2", "a2")
    first, second = Message.objects.filter(branch=branch, role="assistant").order_by("position")
    message_feedback_set(message=first, rating="up")
    message_feedback_set(message=second, rating="down", note="It ignored q2.")
    checkpoint = checkpoint_create(branch=branch, name="after a1", at=2)
    checkpoint_restore(checkpoint=checkpoint)  # a branch that shares a1
    say(current_branch(session), "q3", "a3")
    return session


def feedback_by_content(session) -> dict[str, object]:
    found = {}
    for branch in session.branches.all():
        for m in branch_history(branch):
            if m.role == "assistant":
                found[f"{branch.fork_position}:{m.content}"] = m.metadata.get("feedback")
    return found


def test_the_export_carries_the_feedback_and_the_import_restores_it(alice, rated):
    doc = session_export(session=rated)
    exported = [
        m["metadata"].get("feedback")
        for b in doc["branches"]
        for m in b["messages"]
        if m["role"] == "assistant"
    ]
    assert {"rating": "up", "note": ""} in exported
    assert {"rating": "down", "note": "It ignored q2."} in exported
    copy = session_import(owner=alice, raw=json.dumps(doc))
    assert copy.pk != rated.pk
    assert feedback_by_content(copy) == feedback_by_content(rated)
    assert feedback_by_content(copy) == {
        "0:a1": {"rating": "up", "note": ""},
        "0:a2": {"rating": "down", "note": "It ignored q2."},
        "2:a1": {"rating": "up", "note": ""},  # the shared reply, on the restored branch
        "2:a3": None,
    }


@pytest.mark.parametrize(
    ("role", "feedback"),
    [
        ("assistant", {"rating": "meh", "note": ""}),
        ("assistant", {"rating": "up", "note": "x" * (NOTE_MAX_CHARS + 1)}),
        ("assistant", {"rating": "up", "note": "", "stars": 5}),
        ("assistant", "up"),
        ("user", {"rating": "up", "note": ""}),
    ],
)
def test_a_document_with_feedback_we_would_not_store_is_refused(alice, rated, role, feedback):
    doc = session_export(session=rated)
    target = next(m for m in doc["branches"][0]["messages"] if m["role"] == role)
    target["metadata"]["feedback"] = feedback
    before = Session.objects.count()
    with pytest.raises(ImportRejected, match="feedback"):
        session_import(owner=alice, raw=json.dumps(doc))
    assert Session.objects.count() == before
