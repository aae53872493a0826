"""Erasing a user while they write, on PostgreSQL: the erasure takes the user's lock, then each
of their sessions' locks in order of id, before it deletes anything, the order every writer
takes them in. So it never deadlocks with a writer, it wins, and a writer that comes after it is
told cleanly that what it wrote to is gone (404), never a 500; nothing is left half-written."""

from __future__ import annotations

import functools

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from accounts.errors import ApiKeyLimitReached
from accounts.services import apikey_create
from checkpoints.services import checkpoint_create
from core.errors import Conflict
from memories.services import memory_create
from ops.audit import Who
from ops.erasure import user_erase
from ops.models import AuditRecord
from sessions_app.models import Branch
from sessions_app.services import branch_create, message_append, session_create, session_delete
from sessions_app.turns import turn_fail, turn_start
from tests.ops.test_erasure import holdings_of, rows_pointing_at
from tests.sessions_app.test_delete_races import assert_clean_refusals, race_a_delete

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

User = get_user_model()


def _erase(user) -> None:
    record = user_erase(user=user, who=Who.command("test"))
    assert (record.status, record.error) == (AuditRecord.Status.DONE, "")


def _delete_in_the_admin(user) -> None:
    admin = User.objects.get(username="root")
    client = Client(raise_request_exception=False)
    client.force_login(admin)
    answer = client.post(reverse("admin:accounts_user_delete", args=[user.pk]), {"post": "yes"})
    assert answer.status_code == 302, answer.content[:500]


def _write_something(user, sessions, roots, i: int, step: int) -> None:
    """One write of `user`'s, of the kind (i, step) chooses: a message, a checkpoint, a branch, a
    turn, a session, a memory, an API key, or (late in a race) a session deleted."""
    n = (i + step) % 3
    kind = (i * 7 + step) % 8
    if kind == 0:
        message_append(branch=roots[n], role="user", content=f"{i}-{step}")
    elif kind == 1:
        checkpoint_create(branch=roots[n], name=f"c{i}-{step}")
    elif kind == 2:
        branch_create(session=sessions[n])
    elif kind == 3:
        try:
            turn = turn_start(session=sessions[n], message=f"ask {i}-{step}")
        except Conflict:
            return
        turn_fail(turn=turn, error="stopped by the test")
    elif kind == 4:
        session_create(owner=user, name=f"new {i}-{step}")
    elif kind == 5:
        memory_create(user=user, key=f"k{i}-{step}", category="Project", l0_abstract="a line")
    elif kind == 6:
        try:
            apikey_create(user=user, name=f"key {i}-{step}")
        except ApiKeyLimitReached:
            return
    elif step > 20:
        session_delete(session=sessions[n])


@pytest.mark.parametrize("remove", [_erase, _delete_in_the_admin], ids=["erase", "admin-delete"])
def test_removing_a_user_while_they_write_wins_and_their_writers_get_not_found(remove):
    User.objects.create_superuser("root", password="root-Password-1")  # noqa: S106 - a test user's password
    for round_ in range(4):
        user = User.objects.create_user(f"busy{round_}", password="pw-Secret-123")  # noqa: S106 - a test user's password
        sessions = [session_create(owner=user, name=f"s{n}") for n in range(3)]
        roots = [Branch.objects.get(session=s) for s in sessions]

        writer = functools.partial(_write_something, user, sessions, roots)

        writer_errors, eraser_errors = race_a_delete(writer, lambda user=user: remove(user))
        assert eraser_errors == [], round_
        assert_clean_refusals(writer_errors)
        # A request that loaded the user just before the erasure writes just after it.
        late: list[BaseException] = []
        for kind in range(8):
            try:
                writer(0, 24 + kind)
            except Exception as exc:  # checked below
                late.append(exc)
        assert len(late) == 8
        assert_clean_refusals(late)
        assert not User.objects.filter(pk=user.pk).exists()
        assert set(holdings_of(user)) == {0}  # no row of any kind (tests.ops.test_erasure)
        assert rows_pointing_at(user.pk) == {}
