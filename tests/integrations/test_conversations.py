"""A linked chat's conversation and `/new` racing its first use, on PostgreSQL: however they
interleave, the key names one session, and every `/new` makes exactly one."""

from __future__ import annotations

import threading

import pytest
from django.db import close_old_connections, connection

from integrations.telegram.conversations import chat_session, chat_session_new, session_key
from sessions_app.models import Session

CHAT = 313131
ROUNDS = 5


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_new_racing_first_uses_leaves_one_keyed_session_and_one_per_new(alice):
    failures: list[BaseException] = []
    made_by_new: list[int] = []

    def run(barrier: threading.Barrier, action) -> None:
        close_old_connections()
        try:
            barrier.wait()
            action()
        except BaseException as exc:  # reported by the assertion below
            failures.append(exc)
        finally:
            connection.close()

    def new() -> None:
        made_by_new.append(chat_session_new(user=alice, chat_id=CHAT).pk)

    def use() -> None:
        chat_session(user=alice, chat_id=CHAT)

    for _ in range(ROUNDS):
        barrier = threading.Barrier(4)
        threads = [
            threading.Thread(target=run, args=(barrier, action)) for action in (new, use, use, use)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    assert failures == []
    keyed = Session.objects.filter(owner=alice, session_key=session_key(CHAT))
    assert keyed.count() == 1
    assert keyed.get().pk == made_by_new[-1]  # the last /new's session holds the key
    # Each /new made one session; first uses made at most one more (before any /new).
    assert ROUNDS <= Session.objects.filter(owner=alice).count() <= ROUNDS + 1
    assert len(set(made_by_new)) == ROUNDS
