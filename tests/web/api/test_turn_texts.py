"""A turn refers to its messages instead of copying them: what it answers through the API in
every case (answered, failed, cancelled before it started, rewound away, its branch deleted),
and how a deployment's existing turns are carried over by the migration."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import Message, Turn
from sessions_app.services import branch_fork
from sessions_app.turns import turn_cancel, turn_claim, turn_fail, turn_start
from tests.conftest import ask, say

pytestmark = pytest.mark.django_db


def _texts(api, turn):
    body = api.get(f"/api/v1/turns/{turn.pk}/").json()
    return body["message"], body["reply"]


def test_a_turn_row_holds_no_copy_of_its_texts():
    columns = {f.column for f in Turn._meta.concrete_fields}
    assert "message" not in columns
    assert "reply" not in columns
    assert {"user_message_id", "reply_message_id"} <= columns


def test_an_answered_turn_reads_its_texts_through_its_messages(api, session, branch):
    turn = ask(session, "hello there")
    assert turn.status == "done"
    assert turn.reply
    asked = Message.objects.get(pk=turn.user_message_id)
    answer = Message.objects.get(pk=turn.reply_message_id)
    assert (asked.role, asked.content, asked.position) == ("user", "hello there", 0)
    last = Message.objects.filter(branch=branch, role="assistant").order_by("position").last()
    assert answer == last
    assert _texts(api, turn) == ("hello there", answer.content)
    assert "reply_text" not in turn.metadata  # no copy when the message holds the text


def test_a_failed_turn_still_shows_the_message_it_kept(api, session):
    turn = turn_start(session=session, message="keep me")
    claimed = turn_claim(turn_id=turn.pk)
    assert turn_fail(turn=claimed, error="the model is away")
    assert _texts(api, turn) == ("keep me", "")


def test_a_turn_cancelled_before_it_started_shows_its_message_and_no_reply(api, session):
    turn = turn_cancel(turn=turn_start(session=session, message="never mind"))
    assert turn.status == "cancelled"
    assert _texts(api, turn) == ("never mind", "")


def test_a_turn_rewound_away_answers_empty_texts(api, session, branch):
    say(branch, "a", "b")
    checkpoint = checkpoint_create(branch=branch, name="start")
    turn = ask(session, "forget this")
    checkpoint_restore(checkpoint=checkpoint, mode="rewind")
    say(branch, "c", "d")  # new messages at the positions the turn's used to hold
    # The rewind discarded them: the turn does not show the messages now at those positions.
    assert _texts(api, turn) == ("", "")
    assert api.get(f"/api/v1/turns/{turn.pk}/").json()["status"] == "done"


def test_a_turn_whose_branch_was_deleted_answers_empty_texts(api, session, branch):
    say(branch, "a", "b")
    checkpoint = checkpoint_create(branch=branch, name="two")
    say(branch, "c", "d")
    fork = branch_fork(branch=branch, position=3)  # from the part a rewind to "two" discards
    turn = ask(session, "on the fork")
    assert turn.branch_id == fork.pk
    checkpoint_restore(checkpoint=checkpoint, mode="rewind")  # deletes the fork
    turn.refresh_from_db()
    assert turn.branch_id is None
    assert _texts(api, turn) == ("", "")


def test_a_reply_that_differs_from_its_last_message_is_kept_on_the_turn(session, branch):
    from sessions_app.turns import NewMessage, turn_finish, turn_store_messages

    turn = turn_claim(turn_id=turn_start(session=session, message="q").pk)
    turn_store_messages(turn=turn, messages=[NewMessage(role="tool", tool_name="t")])
    assert turn_finish(turn=turn, reply="said", tools_used=[])
    stored = Turn.objects.get(pk=turn.pk)
    assert stored.reply_message_id is None
    assert stored.reply == "said"


@pytest.mark.django_db(transaction=True)
def test_the_migration_points_existing_turns_at_their_messages_and_keeps_lost_texts():
    before = [("sessions_app", "0013_turn_dispatched_at")]
    after = [("sessions_app", "0014_turn_refers_to_messages")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    User = old.get_model("accounts", "User")
    Session = old.get_model("sessions_app", "ExternalSession")
    Branch = old.get_model("sessions_app", "InternalSession")
    OldMessage = old.get_model("sessions_app", "Message")
    OldTurn = old.get_model("sessions_app", "Turn")
    owner = User.objects.create(username="carol")
    session = Session.objects.create(owner=owner, session_name="s")
    branch = Branch.objects.create(session=session, is_current=True, message_count=4)
    texts = ["hi", "hello", "more", "sure"]
    rows = [
        OldMessage.objects.create(
            branch=branch, position=i, role="user" if i % 2 == 0 else "assistant", content=t
        )
        for i, t in enumerate(texts)
    ]
    by_id = OldTurn.objects.create(
        session=session,
        branch=branch,
        status="done",
        message="hi",
        reply="hello",
        user_message_position=0,
        metadata={"user_message_id": rows[0].pk},
    )
    by_position = OldTurn.objects.create(
        session=session,
        branch=branch,
        status="done",
        message="more",
        reply="sure",
        user_message_position=2,
    )
    lost = OldTurn.objects.create(
        session=session,
        branch=None,
        status="failed",
        message="gone",
        reply="",
        user_message_position=4,
        metadata={"model": "m"},
    )
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    new = executor.loader.project_state(after).apps.get_model("sessions_app", "Turn")
    one, two, three = (new.objects.get(pk=t.pk) for t in (by_id, by_position, lost))
    assert (one.user_message_id, one.reply_message_id) == (rows[0].pk, rows[1].pk)
    assert (two.user_message_id, two.reply_message_id) == (rows[2].pk, rows[3].pk)
    assert three.user_message_id is None
    assert three.reply_message_id is None
    assert three.metadata == {"model": "m", "message_text": "gone"}
    # Read through today's model (every later migration applied), the three answer as they did.
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    current = {t.pk: (t.message, t.reply) for t in Turn.objects.all()}
    assert current == {one.pk: ("hi", "hello"), two.pk: ("more", "sure"), three.pk: ("gone", "")}
    # And back: the copies return.
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    back = executor.loader.project_state(before).apps.get_model("sessions_app", "Turn")
    assert {t.pk: (t.message, t.reply, t.metadata) for t in back.objects.all()} == {
        one.pk: ("hi", "hello", {"user_message_id": rows[0].pk}),
        two.pk: ("more", "sure", {}),
        three.pk: ("gone", "", {"model": "m"}),
    }
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
