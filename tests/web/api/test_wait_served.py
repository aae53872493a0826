"""`"wait": true` in the embedded mode (SQLite, in-memory channel layer, turns run by the web
process itself), served by daphne as `make run` serves it, while the process also holds a socket
of another session: the turn's end wakes the wait (tests/deploy/test_wait.py holds the same on
the scaled-out deployment). The poll is raised to 20 s, so only a real wake answers within the
bound of 1 s from the turn's recorded end; a woken wait answers in tens of milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.procs import Services, app_env
from tests.waits import lags_of_waits_beside_a_socket

POLL = 20
WOKEN = 1.0
SETUP = "from accounts.models import User; User.objects.create_user('waiter')"


@pytest.fixture(scope="module")
def served(model_server, tmp_path_factory) -> Iterator[tuple[str, str]]:
    tmp = tmp_path_factory.mktemp("wait-served")
    env = app_env(
        tmp / "var",
        model_server.base_url,
        API_TURN_WAIT_POLL_SECONDS=str(POLL),
        API_TURN_WAIT_SECONDS=str(3 * POLL),
    )
    services = Services(tmp)
    try:
        services.prepare(env)
        _, key = services.setup_with_key(env, SETUP, "waiter")
        yield services.start_daphne(env), key
    finally:
        services.stop_all()


def test_an_embedded_wait_beside_another_sessions_socket_is_woken_by_the_turns_end(served, llm):
    base, key = served
    lags = lags_of_waits_beside_a_socket(base, key, llm)
    assert len(lags) == 3
    assert max(lags) < WOKEN, f"the wait was not woken by the turn's end: {lags}"
