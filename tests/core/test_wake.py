"""`wake.wait_until`, what `"wait": true` and a turn's wait for an approval wait with: it wakes on
a ring of its turn's doorbell, sent in this process (the embedded mode) or through Redis pub/sub
(any process), and it still ends through its slow database poll when no ring ever comes. No
timing is asserted: each wait runs on a thread that a test only gives up on after a minute (a
wait that does not wake would block for an hour)."""

from __future__ import annotations

import threading

import pytest

from core import events, wake

pytestmark = pytest.mark.django_db(transaction=True)

HOUR = 3600.0
ENDS = frozenset({"turn.finished", "turn.failed"})


def _waiting(turn: int, done, *, poll: float, timeout: float = HOUR) -> threading.Thread:
    thread = threading.Thread(
        target=wake.wait_until,
        kwargs={"turn": turn, "types": ENDS, "done": done, "timeout": timeout, "poll": poll},
        daemon=True,
    )
    thread.start()
    return thread


class Flag:
    """What `done` reads: a value set by another thread, and how often it was asked."""

    def __init__(self) -> None:
        self.value = False
        self.asked = threading.Event()
        self.calls = 0

    def __call__(self) -> bool:
        self.calls += 1
        self.asked.set()
        return self.value


def _finish(session_id: int, turn: int) -> None:
    events.turn_finished(
        session=session_id,
        turn=turn,
        reply="",
        tools_used=[],
        checkpoint=None,
        rolled_back_to=None,
        finish_reason="stop",
    )


def _wakes_on_its_turns_end() -> None:
    flag = Flag()
    waiter = _waiting(7, flag, poll=HOUR)  # no poll: only a ring can wake it
    assert flag.asked.wait(60)
    _finish(9001, turn=8)  # another turn's end: not the one waited for
    wake.ring("turn.started", 7)  # no doorbell rings on it
    flag.value = True
    _finish(9001, turn=7)  # as a turn's end is sent: through core.events
    waiter.join(60)
    assert not waiter.is_alive(), "the wait did not wake on its turn's end"
    # Asked once at the start and once on its ring; the other rings woke nothing.
    assert flag.calls == 2


def test_a_wait_wakes_on_its_turns_end_sent_in_this_process(settings):
    settings.REDIS_URL = ""  # the embedded mode, whatever the suite runs on
    _wakes_on_its_turns_end()


@pytest.mark.redis
def test_a_wait_wakes_on_its_turns_end_through_redis(settings):
    # With Redis the wait hears only Redis pub/sub: what rings here reaches it as a ring sent by
    # a worker in another process would.
    assert settings.REDIS_URL
    _wakes_on_its_turns_end()


@pytest.mark.redis
def test_a_ring_published_by_another_client_wakes_the_wait(settings):
    import redis

    flag = Flag()
    waiter = _waiting(7, flag, poll=HOUR)
    assert flag.asked.wait(60)
    flag.value = True
    # Another process's ring: a plain PUBLISH on the turn's channel, no code of this process.
    other = redis.Redis.from_url(settings.REDIS_URL)
    try:
        assert other.publish(wake._channel(7), "turn.failed") == 1
    finally:
        other.close()
    waiter.join(60)
    assert not waiter.is_alive(), "the wait did not wake on the ring carried by Redis"
    assert flag.calls == 2


def _ends_through_the_poll() -> None:
    flag = Flag()
    waiter = _waiting(9003, flag, poll=0.05)
    assert flag.asked.wait(60)
    flag.value = True  # the turn ended by a path that rings nothing
    waiter.join(60)
    assert not waiter.is_alive(), "the wait did not see the end without a ring"
    assert flag.calls >= 2


def test_a_wait_ends_through_the_poll_when_no_ring_comes(settings):
    settings.REDIS_URL = ""
    _ends_through_the_poll()


@pytest.mark.redis
def test_a_wait_on_redis_ends_through_the_poll_when_no_ring_comes(settings):
    assert settings.REDIS_URL
    _ends_through_the_poll()


def test_a_wait_gives_up_at_its_timeout():
    flag = Flag()
    waiter = _waiting(9004, flag, poll=HOUR, timeout=0.2)
    waiter.join(60)
    assert not waiter.is_alive()
    assert flag.value is False


def test_a_wait_on_an_event_that_rings_nothing_is_refused():
    with pytest.raises(ValueError, match=r"message\.delta"):
        wake.wait_until(
            turn=1, types=frozenset({"message.delta"}), done=lambda: True, timeout=1, poll=1
        )
