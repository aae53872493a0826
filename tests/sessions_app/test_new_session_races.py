"""The chat page's "New session" clicked several times at once, on PostgreSQL (SQLite ignores
`select_for_update`): the clicks take the lock on the owner's row, so they end with one blank
session, which all of them open (issue 39)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from sessions_app.models import Branch, Session
from sessions_app.services import message_append

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CLICKS = 4
ROUNDS = 5


def _click_at_once(clients: list[Client]) -> tuple[list[int], list[BaseException]]:
    opened: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(clients))

    def click(client: Client) -> None:
        try:
            barrier.wait()
            response = client.post(reverse("chat:new"))
            assert response.status_code == 302, response.status_code
            opened.append(int(response["Location"].rstrip("/").rsplit("/", 1)[1]))
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=click, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a click is still waiting"
    return opened, errors


def test_new_session_clicked_at_once_makes_one_blank_session(alice):
    clients = [Client() for _ in range(CLICKS)]
    for client in clients:
        client.force_login(alice)
    for round_ in range(ROUNDS):
        opened, errors = _click_at_once(clients)
        assert errors == [], f"round {round_}"
        assert Session.objects.filter(owner=alice).count() == round_ + 1, f"round {round_}"
        assert len(set(opened)) == 1, f"round {round_}: {opened}"
        # Used: the next round's clicks must make a new one.
        branch = Branch.objects.get(session_id=opened[0])
        message_append(branch=branch, role="user", content=f"round {round_}")
