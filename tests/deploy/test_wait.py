"""`"wait": true` on the scaled-out deployment is woken by the turn's own end.

A daphne process that also held a WebSocket of another session answered a `wait` only at its
next database poll (1.5 s by default, 36 of 36 samples in the probe): the wait received on the
shared Redis channel layer beside the socket's consumer, and the turn's end never woke it. Here
the poll is raised to 20 s, so only a real wake answers in time; the time from the turn's end as
the worker recorded it (`finished_at`) to the answer's arrival must stay far below any poll. The
bound (1 s) is the correctness of the wake, not a speed target: a woken wait answers in tens of
milliseconds, a missed one at the poll.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.waits import lags_of_waits_beside_a_socket

from .conftest import Stack, deploy_env, running

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

POLL = 20  # API_TURN_WAIT_POLL_SECONDS of the stack: far longer than any wake may take
WOKEN = 1.0  # seconds from the turn's end to the answer: a wake, never a poll


@pytest.fixture(scope="module")
def stack(model_server, database, fresh_redis, tmp_path_factory) -> Iterator[Stack]:
    env = deploy_env(
        tmp_path_factory.mktemp("wait-var"),
        model_server.base_url,
        database.url,
        API_TURN_WAIT_POLL_SECONDS=str(POLL),
        API_TURN_WAIT_SECONDS=str(3 * POLL),
    )
    with running(tmp_path_factory, "wait", env) as stack:
        stack.web("web")
        stack.worker("worker")
        yield stack


def test_a_wait_on_a_process_holding_another_sessions_socket_is_woken_by_the_turns_end(stack, llm):
    lags = lags_of_waits_beside_a_socket(stack.urls["web"], stack.api_key("waiter"), llm)
    assert len(lags) == 3
    assert max(lags) < WOKEN, f"the wait was not woken by the turn's end: {lags}"
