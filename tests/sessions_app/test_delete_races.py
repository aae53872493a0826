"""Deleting a session while it is written, on PostgreSQL: the delete takes the session's lock
first, like every other write, so it never deadlocks with a writer. The delete wins; a writer
that comes after it finds the session gone (404), and nothing is left half-written."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test import Client
from rest_framework.throttling import SimpleRateThrottle

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create, checkpoint_restore
from core.errors import Conflict, NotFound
from sessions_app.models import Branch, Message, Session, Turn
from sessions_app.services import (
    branch_create,
    branch_rename,
    message_append,
    session_create,
    session_delete,
    session_update,
)
from sessions_app.turns import turn_fail, turn_start

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITERS = 6
ROUNDS = 6


def race_a_delete(writer, deleter, *, writers: int = WRITERS) -> tuple[list, list]:
    """Run `writers` threads calling writer(i, step) until they are refused (or 200 steps), and
    one thread calling deleter() once every writer has written a little. Returns the writers'
    errors and the deleter's."""
    started = threading.Barrier(writers + 1)
    warm = threading.Semaphore(0)
    writer_errors: list[BaseException] = []
    deleter_errors: list[tuple[BaseException, object]] = []

    def write(i: int) -> None:
        try:
            started.wait()
            for step in range(200):
                writer(i, step)
                # Each step is a request's worth of work: its connection goes back to the pool
                # after it, as a request's does. Held for the thread's life, the six writers,
                # the deleter and the test's own thread left 2 of the process's 10 (measured),
                # and CI's deleter once waited out the pool's 30 s for one; what held those two
                # is not known: a deleter's failure now says how the pool stood.
                connection.close()
                if step == 2:
                    warm.release()
        except BaseException as exc:  # reported by the test
            writer_errors.append(exc)
            warm.release()
        finally:
            connection.close()

    def delete() -> None:
        try:
            started.wait()
            for _ in range(writers):
                warm.acquire(timeout=30)
            deleter()
        except BaseException as exc:  # reported by the test, with the pool as it was then
            pool = getattr(connection, "pool", None)
            deleter_errors.append((exc, pool.get_stats() if pool is not None else None))
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    threads.append(threading.Thread(target=delete))
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread is still stuck"
    return writer_errors, deleter_errors


def assert_nothing_left(session_id: int) -> None:
    assert not Session.objects.filter(pk=session_id).exists()
    assert not Branch.objects.filter(session_id=session_id).exists()
    assert not Message.objects.filter(branch__session_id=session_id).exists()
    assert not Checkpoint.objects.filter(branch__session_id=session_id).exists()
    assert not Turn.objects.filter(session_id=session_id).exists()


def assert_clean_refusals(errors: list[BaseException]) -> None:
    """Every writer stopped with a domain error the API answers 404 or 409, nothing else."""
    unclean = [e for e in errors if not isinstance(e, NotFound | Conflict)]
    assert unclean == [], unclean


def test_deleting_a_session_while_messages_checkpoints_branches_and_turns_are_written(alice):
    for round_ in range(ROUNDS):
        session = session_create(owner=alice, name=f"busy {round_}")
        root = Branch.objects.get(session=session)
        message_append(branch=root, role="user", content="seed")
        seed = checkpoint_create(branch=root, name="seed")

        def writer(i: int, step: int, session=session, root=root, seed=seed) -> None:
            kind = (i + step) % 6
            if kind == 0:
                message_append(branch=root, role="user", content=f"{i}-{step}")
            elif kind == 1:
                checkpoint_create(branch=root, name=f"t{i}-{step}")
            elif kind == 2:
                checkpoint_restore(checkpoint=seed, mode="branch")
            elif kind == 3:
                try:
                    turn = turn_start(session=session, message=f"ask {i}-{step}")
                except Conflict:
                    return
                turn_fail(turn=turn, error="stopped by the test")
            elif kind == 4:
                branch_rename(branch=branch_create(session=session), name=f"b{i}-{step}")
            else:
                session_update(session=session, name=f"renamed {i}-{step}")

        writer_errors, deleter_errors = race_a_delete(
            writer, lambda s=session: session_delete(session=s)
        )
        assert deleter_errors == [], f"round {round_}: the delete failed: {deleter_errors!r}"
        assert_clean_refusals(writer_errors)
        assert_nothing_left(session.pk)


def test_the_api_answers_404_never_500_to_writers_racing_a_delete(alice, monkeypatch):
    # The writers write as fast as the machine lets them until the delete refuses them: up to
    # 1,200 requests a round, one user's, within the API's per-user throttle's minute (CI saw
    # the second round's DELETE answered 429). The throttle is not what this test is about.
    rates = {"user": "100000/min", "anon": "100000/min"}
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)
    for round_ in range(ROUNDS):
        session = session_create(owner=alice, name=f"api {round_}")
        root = Branch.objects.get(session=session)
        message_append(branch=root, role="user", content="seed")
        clients = [Client(raise_request_exception=False) for _ in range(WRITERS + 1)]
        for client in clients:
            client.force_login(alice)

        def writer(i: int, step: int, session=session, root=root, clients=clients) -> None:
            client = clients[i]
            if (i + step) % 3 == 0:
                r = client.post(
                    f"/api/v1/sessions/{session.pk}/checkpoints/",
                    {"name": f"c{i}-{step}"},
                    content_type="application/json",
                )
            elif (i + step) % 3 == 1:
                r = client.post(f"/api/v1/branches/{root.pk}/activate/")
            else:
                r = client.patch(
                    f"/api/v1/sessions/{session.pk}/",
                    {"name": f"n{i}-{step}"},
                    content_type="application/json",
                )
            assert r.status_code in (200, 201, 404, 409), (r.status_code, r.content[:300])
            if r.status_code == 404:
                raise NotFound(r.json()["detail"])

        deleted: list[int] = []

        def deleter(session=session, clients=clients, deleted=deleted) -> None:
            deleted.append(clients[-1].delete(f"/api/v1/sessions/{session.pk}/").status_code)

        writer_errors, deleter_errors = race_a_delete(writer, deleter)
        assert deleter_errors == []
        assert deleted == [204], f"round {round_}: DELETE answered {deleted}"
        assert_clean_refusals(writer_errors)
        assert_nothing_left(session.pk)
