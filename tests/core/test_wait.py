"""`events.wait_until`, what `"wait": true` waits with: it wakes on the event it waits for, from
this process or through the channel layer (Redis), and it still ends through its slow database
poll when no event ever comes. No timing is asserted: each wait runs on a thread that a test only
gives up on after a minute (a wait that does not wake would block for an hour)."""

from __future__ import annotations

import threading

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from core import events

pytestmark = pytest.mark.django_db(transaction=True)

HOUR = 3600.0


def _waiting(session_id: int, done, *, poll: float, timeout: float = HOUR) -> threading.Thread:
    thread = threading.Thread(
        target=events.wait_until,
        args=(session_id, lambda e: e["type"] == "turn.finished" and e["turn"] == 7),
        kwargs={"done": done, "timeout": timeout, "poll": poll},
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


def _wakes_on_the_event(session_id: int) -> None:
    flag = Flag()
    waiter = _waiting(session_id, flag, poll=HOUR)  # no poll: only the event can wake it
    assert flag.asked.wait(60)
    _finish(session_id, turn=8)  # another turn's end: not the one waited for
    flag.value = True
    _finish(session_id, turn=7)
    waiter.join(60)
    assert not waiter.is_alive(), "the wait did not wake on its event"
    # Asked once at the start and once per matching event; the other turn's event woke nothing.
    assert flag.calls == 2


def test_wait_wakes_on_the_event_sent_in_this_process():
    _wakes_on_the_event(9001)


@pytest.mark.redis
def test_wait_wakes_on_the_event_from_another_process_through_redis(settings):
    assert "redis" in settings.CHANNEL_LAYERS["default"]["BACKEND"].lower()
    flag = Flag()
    waiter = _waiting(9002, flag, poll=HOUR)
    assert flag.asked.wait(60)
    flag.value = True
    # As a worker in another process sends it: on the channel layer only, so no listener of
    # this process hears it directly.
    event = {"type": "turn.finished", "session": 9002, "turn": 7}
    layer = get_channel_layer()
    async_to_sync(layer.group_send)(
        events.group_name(9002), {"type": "rollback.event", "event": event}
    )
    waiter.join(60)
    assert not waiter.is_alive(), "the wait did not wake on the event carried by Redis"
    assert flag.calls == 2


def test_wait_ends_through_the_poll_when_no_event_comes():
    flag = Flag()
    waiter = _waiting(9003, flag, poll=0.05)
    assert flag.asked.wait(60)
    flag.value = True  # the turn ended by a path that sends nothing
    waiter.join(60)
    assert not waiter.is_alive(), "the wait did not see the end without an event"
    assert flag.calls >= 2


def test_wait_gives_up_at_its_timeout():
    flag = Flag()
    waiter = _waiting(9004, flag, poll=HOUR, timeout=0.2)
    waiter.join(60)
    assert not waiter.is_alive()
    assert flag.value is False


@pytest.mark.redis
def test_sync_code_publishes_through_one_loop_in_order(settings):
    # A worker's turn publishes each streamed token from sync code: through one persistent
    # loop of the process (a new loop, and Redis connection, per message cost ~4 ms each).
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(9005), channel)
    for i in range(30):
        events.message_delta(session=9005, turn=1, delta=f"t{i} ", seq=i + 1)
    loop = events._publisher_loop()
    assert events._publisher_loop() is loop
    assert loop.is_running()

    async def collect() -> list[int]:
        return [(await layer.receive(channel))["event"]["seq"] for _ in range(30)]

    assert async_to_sync(collect)() == list(range(1, 31))
