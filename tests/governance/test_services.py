"""governance.services: an administrator's restore on a user's behalf, on the record."""

from __future__ import annotations

import threading

import pytest
from django.db import DatabaseError, connection

from checkpoints.errors import CheckpointNotFound
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create, checkpoint_restore
from core.errors import InvalidInput
from core.events import listen
from governance.errors import GovernanceForbidden
from governance.models import AuditRecord
from governance.selectors import admin_notices
from governance.services import NoticeNotFound, admin_notice_dismiss, restore_on_behalf
from sessions_app.errors import TurnInProgress
from sessions_app.models import Branch, Message, Turn
from sessions_app.services import session_create
from sessions_app.turns import turn_start
from tests.conftest import say

from .conftest import staff_user

pytestmark = pytest.mark.django_db


def current(session) -> Branch:
    return Branch.objects.get(session=session, is_current=True)


@pytest.fixture
def marked(session, branch):
    """Alice's session: two exchanges, a checkpoint after the first, then more after it."""
    say(branch, "first question", "first answer")
    checkpoint = checkpoint_create(branch=branch, name="before the mistake")
    say(branch, "second question", "a wrong answer")
    checkpoint_create(branch=branch, name="after the mistake")
    branch.refresh_from_db()
    return checkpoint


def test_restore_as_branch_makes_the_users_new_current_branch_and_records_who_why_what(
    governor, alice, session, branch, marked
):
    record = restore_on_behalf(
        actor=governor, checkpoint=marked, mode="branch", reason="  Asked by alice by mail.  "
    )

    new = current(session)
    assert new.pk != branch.pk
    assert new.forked_from_id == marked.pk
    assert new.message_count == 2
    branch.refresh_from_db()
    assert branch.message_count == 4  # the old branch is kept
    assert record.actor == governor
    assert record.actor_name == "governor"
    assert record.user == alice
    assert record.session == session
    assert (record.checkpoint_id, record.checkpoint_ref) == (marked.pk, marked.pk)
    assert record.checkpoint_name == "before the mistake"
    assert record.action == AuditRecord.Action.RESTORE_AS_BRANCH
    assert record.reason == "Asked by alice by mail."  # trimmed
    assert record.branch_ref == new.pk
    assert record.deleted_checkpoints == record.deleted_messages == 0
    assert record.acknowledged_at is None


def test_rewind_counts_what_it_deleted(governor, session, branch, marked):
    later = checkpoint_create(branch=branch, name="later")
    forked = checkpoint_restore(checkpoint=later).branch  # a branch forked from the cut part
    say(forked, "on the fork")

    record = restore_on_behalf(actor=governor, checkpoint=marked, mode="rewind", reason="Undo")

    branch.refresh_from_db()
    assert branch.message_count == 2
    assert branch.is_current
    assert record.action == AuditRecord.Action.REWIND
    assert record.branch_ref == branch.pk
    assert record.deleted_messages == 2
    assert record.deleted_branches == 1
    # "after the mistake" and "later" on the branch; none on the fork.
    assert record.deleted_checkpoints == 2
    assert not Branch.objects.filter(pk=forked.pk).exists()
    assert list(Checkpoint.objects.filter(branch=branch)) == [marked]


@pytest.mark.django_db(transaction=True)  # no transaction of the test's around the call
def test_the_record_and_the_restore_are_one_transaction(governor, session, branch, marked):
    """The record cannot be written (the database refuses its INSERT, after the restore's own
    writes): the restore is undone with it, with no transaction of the caller's around it."""
    branches = Branch.objects.count()
    inserted: list[str] = []

    def refuse_the_record(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("INSERT"):
            inserted.append(sql)
            if AuditRecord._meta.db_table in sql:
                raise DatabaseError("the record cannot be written")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(refuse_the_record), pytest.raises(DatabaseError):
        restore_on_behalf(actor=governor, checkpoint=marked, mode="branch", reason="Undo")
    # The restore wrote its branch before the record failed...
    assert any(Branch._meta.db_table in sql for sql in inserted)
    # ...and none of it stays.
    assert AuditRecord.objects.count() == 0
    assert Branch.objects.count() == branches
    assert current(session).pk == branch.pk


def event_types(django_capture_on_commit_callbacks, session, restore) -> list[tuple]:
    events: list = []
    stop = listen(session.pk, events.append)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            restore()
    finally:
        stop()
    return [
        (e["type"], e.get("checkpoint"), tuple(e.get("deleted_checkpoints", ()))) for e in events
    ]


@pytest.mark.parametrize("mode", ["branch", "rewind"])
def test_it_sends_the_same_events_as_the_users_own_restore(
    governor, alice, marked, session, django_capture_on_commit_callbacks, mode
):
    twin = session_create(owner=alice, name="twin")
    twin_branch = current(twin)
    say(twin_branch, "first question", "first answer")
    twin_cp = checkpoint_create(branch=twin_branch, name="before the mistake")
    say(twin_branch, "second question", "a wrong answer")
    twin_later = checkpoint_create(branch=twin_branch, name="after the mistake")
    later = Checkpoint.objects.get(branch__session=session, checkpoint_name="after the mistake")

    users = event_types(
        django_capture_on_commit_callbacks,
        twin,
        lambda: checkpoint_restore(checkpoint=twin_cp, mode=mode),
    )
    admins = event_types(
        django_capture_on_commit_callbacks,
        session,
        lambda: restore_on_behalf(actor=governor, checkpoint=marked, mode=mode, reason="Undo"),
    )

    def relabel(rows, cp, gone):
        return [
            (t, "cp" if c == cp else c, tuple("gone" if g == gone else g for g in d))
            for t, c, d in rows
        ]

    assert relabel(users, twin_cp.pk, twin_later.pk) == relabel(admins, marked.pk, later.pk)
    assert [t for t, _, _ in admins][:1] == ["branch.changed"]


def test_it_is_refused_while_a_turn_of_the_session_is_active(governor, session, branch, marked):
    turn = turn_start(session=session, message="still asking")
    assert turn.status == Turn.Status.QUEUED
    messages = Message.objects.count()

    with pytest.raises(TurnInProgress):
        restore_on_behalf(actor=governor, checkpoint=marked, mode="rewind", reason="Undo")

    assert AuditRecord.objects.count() == 0
    assert Message.objects.count() == messages
    assert current(session).pk == branch.pk


@pytest.mark.parametrize(
    ("reason", "says"),
    [
        ("", "Give the reason"),
        ("   \n\t ", "Give the reason"),
        (None, "Give the reason"),
        (42, "Give the reason"),
        ("x" * 2001, "limited to 2000"),
        ("bad \x00 byte", "NUL"),
        ("lone \ud800 surrogate", "lone surrogates"),
    ],
)
def test_a_missing_or_unstorable_reason_is_refused_and_nothing_is_written(
    governor, session, branch, marked, reason, says
):
    with pytest.raises(InvalidInput, match=says):
        restore_on_behalf(actor=governor, checkpoint=marked, mode="branch", reason=reason)
    assert AuditRecord.objects.count() == 0
    assert current(session).pk == branch.pk


def test_a_reason_of_2000_characters_is_kept_whole(governor, marked):
    record = restore_on_behalf(actor=governor, checkpoint=marked, mode="branch", reason="y" * 2000)
    assert record.reason == "y" * 2000


def test_an_unknown_mode_is_refused(governor, marked):
    with pytest.raises(InvalidInput, match="Unknown restore mode"):
        restore_on_behalf(actor=governor, checkpoint=marked, mode="merge", reason="Undo")
    assert AuditRecord.objects.count() == 0


def test_only_active_staff_with_the_permission_may_do_it(
    django_user_model, clerk, alice, admin_user, session, branch, marked
):
    not_staff = django_user_model.objects.create_user("member")
    from django.contrib.auth.models import Permission

    not_staff.user_permissions.add(Permission.objects.get(codename="govern_conversations"))
    not_staff = django_user_model.objects.get(pk=not_staff.pk)
    for who in (clerk, alice, not_staff):
        with pytest.raises(GovernanceForbidden):
            restore_on_behalf(actor=who, checkpoint=marked, mode="branch", reason="Undo")
    assert AuditRecord.objects.count() == 0
    # A superuser holds every permission.
    assert restore_on_behalf(actor=admin_user, checkpoint=marked, mode="branch", reason="Undo")


def test_a_checkpoint_of_another_session_is_not_found(governor, alice, session, marked):
    other = session_create(owner=alice, name="other")
    with pytest.raises(CheckpointNotFound):
        restore_on_behalf(
            actor=governor, checkpoint=marked, mode="branch", reason="Undo", session=other
        )
    assert AuditRecord.objects.count() == 0


def test_the_record_keeps_the_names_when_the_admin_and_the_checkpoint_are_gone(
    django_user_model, governor, marked
):
    record = restore_on_behalf(actor=governor, checkpoint=marked, mode="rewind", reason="Undo")
    Checkpoint.objects.filter(pk=marked.pk).delete()
    governor.delete()
    record.refresh_from_db()
    assert record.actor is None
    assert record.actor_name == "governor"
    assert record.checkpoint is None
    assert (record.checkpoint_ref, record.checkpoint_name) == (marked.pk, "before the mistake")


def test_the_owner_dismisses_a_notice_and_no_one_else_can(
    governor, alice, bob, session, marked, django_capture_on_commit_callbacks
):
    record = restore_on_behalf(actor=governor, checkpoint=marked, mode="branch", reason="Undo")
    assert admin_notices(session) == [record]

    with pytest.raises(NoticeNotFound):
        admin_notice_dismiss(user=bob, session=session, pk=record.pk)
    with pytest.raises(NoticeNotFound):
        admin_notice_dismiss(user=alice, session=session, pk=record.pk + 1000)
    assert admin_notices(session) == [record]

    admin_notice_dismiss(user=alice, session=session, pk=record.pk)
    admin_notice_dismiss(user=alice, session=session, pk=record.pk)  # twice: still fine
    assert admin_notices(session) == []
    record.refresh_from_db()
    assert record.acknowledged_at is not None


# --- PostgreSQL: the locks ----------------------------------------------------------------------


def _race(actor, session, checkpoint) -> str | None:
    """A rewind on the owner's behalf and a turn's start, at once; "refused" or None."""
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []
    outcome: list[str] = []

    def restore() -> None:
        try:
            barrier.wait()
            restore_on_behalf(actor=actor, checkpoint=checkpoint, mode="rewind", reason="race")
        except TurnInProgress:
            outcome.append("refused")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    def start() -> None:
        try:
            barrier.wait()
            turn_start(session=session, message="hello")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=restore), threading.Thread(target=start)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    return outcome[0] if outcome else None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_restore_racing_a_turn_start_never_restores_under_a_running_turn(django_user_model):
    """The check for an active turn is made under the session's lock, which a turn's start takes
    too: either the restore goes first (and the turn is asked on the restored branch) or the
    turn does (and the restore is refused)."""
    owner = django_user_model.objects.create_user("owner")
    actor = staff_user(django_user_model, "racer", govern=True)
    for round_ in range(8):
        session = session_create(owner=owner, name=f"race {round_}")
        root = current(session)
        say(root, "q", "a")
        checkpoint = checkpoint_create(branch=root, name="cp")
        say(root, "q2", "a2")

        outcome = _race(actor, session, checkpoint)

        turn = Turn.objects.get(session=session)
        record = AuditRecord.objects.filter(session=session).first()
        if outcome == "refused":
            assert record is None
            root.refresh_from_db()
            assert root.message_count == 5  # untouched, and the turn's message appended
        else:
            # The rewind went first: the turn's message sits right after the checkpoint.
            assert record is not None
            assert turn.user_message_position == 2


def test_erasing_the_administrator_keeps_the_record_without_their_name(
    django_user_model, governor, alice, marked
):
    from ops.audit import Who
    from ops.erasure import user_erase

    record = restore_on_behalf(actor=governor, checkpoint=marked, mode="branch", reason="Undo")
    user_erase(user=governor, who=Who(trigger="command", name="ops"))
    record.refresh_from_db()
    assert record.actor is None
    assert record.actor_name == ""
    assert record.reason == "Undo"


def test_erasing_the_user_takes_the_records_about_them(governor, alice, marked):
    from ops.audit import Who
    from ops.erasure import user_erase

    restore_on_behalf(actor=governor, checkpoint=marked, mode="branch", reason="Undo")
    user_erase(user=alice, who=Who(trigger="command", name="ops"))
    assert AuditRecord.objects.count() == 0
