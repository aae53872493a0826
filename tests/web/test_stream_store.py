"""One stream per turn attempt: pieces coalesced, stored before they are sent and never lost; the
integration socket's `turn.snapshot` and gap filling; at most two queries a socket per event; a
send that renders only the composer; in-memory events published without a thread per event."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import connection, connections
from django.db.backends.signals import connection_created
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from core import events
from rollback_site.asgi import application
from sessions_app.models import Turn
from sessions_app.reply_stream import (
    FLUSH_SECONDS,
    ReplyStream,
    store,
    stream_key,
    stream_read,
    stream_snapshot,
)
from sessions_app.services import session_create
from tests.sockets import claimed_turn, socket_headers
from web.ws import access
from web.ws.db import THREADS, pool

pytestmark = pytest.mark.django_db(transaction=True)


def _stream(turn: Turn) -> ReplyStream:
    return ReplyStream(session_id=turn.session_id, turn_id=turn.pk, attempt=turn.attempts)


def _heard(session_id: int) -> tuple[list[events.Event], object]:
    heard: list[events.Event] = []
    stop = events.listen(session_id, heard.append)
    return heard, stop


def test_tokens_are_coalesced_into_few_pieces_each_stored_before_it_is_sent(alice, session):
    turn = claimed_turn(session)
    tokens = [f"t{n} " for n in range(3000)]
    stored_when_sent: list[bool] = []

    def check(event: events.Event) -> None:
        if event["type"] == "message.delta":
            pieces = stream_read(turn_id=turn.pk, attempt=1, after=event["seq"] - 1)
            stored_when_sent.append(pieces[:1] == [event["delta"]])

    heard, stop = _heard(session.pk)
    stop_check = events.listen(session.pk, check)
    try:
        started = time.monotonic()
        with _stream(turn) as reply:
            for token in tokens:
                reply.add(token)
        elapsed = time.monotonic() - started
    finally:
        stop()
        stop_check()
    deltas = [e for e in heard if e["type"] == "message.delta"]
    assert "".join(e["delta"] for e in deltas) == "".join(tokens)  # nothing lost, in order
    assert [e["seq"] for e in deltas] == list(range(1, len(deltas) + 1))
    assert all(e["attempt"] == 1 and e["turn"] == turn.pk for e in deltas)
    # One piece per FLUSH_SECONDS at most (and the first at once, and the rest at the end), or
    # one per FLUSH_CHARS when tokens come faster than that.
    chars = len("".join(tokens))
    assert len(deltas) <= elapsed / FLUSH_SECONDS + chars / 2000 + 2
    assert len(deltas) < len(tokens) / 10
    assert all(stored_when_sent)
    snapshot = stream_snapshot(turn_id=turn.pk, attempt=1)
    assert (snapshot.text, snapshot.seq) == ("".join(tokens), len(deltas))


def test_a_publisher_that_falls_behind_gets_fewer_larger_pieces_and_loses_none(alice, session):
    # Every piece takes 30 ms to go out (a listener as slow as a loaded channel layer), longer
    # than FLUSH_SECONDS: without coalescing more, every token after the first would go out as a
    # piece of its own, one slow publish each, holding the model's tokens back.
    turn = claimed_turn(session)
    tokens = [f"w{n} " for n in range(200)]
    heard: list[events.Event] = []

    def slow(event: events.Event) -> None:
        if event["type"] == "message.delta":
            heard.append(event)
            time.sleep(0.03)

    stop = events.listen(session.pk, slow)
    try:
        with _stream(turn) as reply:
            for token in tokens:
                reply.add(token)
                time.sleep(0.002)
    finally:
        stop()
    assert "".join(e["delta"] for e in heard) == "".join(tokens)  # nothing lost, in order
    assert [e["seq"] for e in heard] == list(range(1, len(heard) + 1))
    assert len(heard) < len(tokens) / 5
    assert stream_snapshot(turn_id=turn.pk, attempt=1).text == "".join(tokens)


class _PushWatch:
    """The pushes to `keys` that each MULTI/EXEC of a Redis client made, watched with MONITOR
    (of the client's database) until `stop`."""

    END = "end-of-the-watch"

    def __init__(self, client: redis.Redis, keys: set[str]) -> None:
        self.client, self.keys = client, keys
        self.db = client.connection_pool.connection_kwargs.get("db", 0)
        self.batches: list[int] = []
        self._open: dict[tuple[object, object], int] = {}
        watching = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(watching,))
        self._thread.start()
        assert watching.wait(5)

    def _watch(self, watching: threading.Event) -> None:
        with self.client.monitor() as monitor:
            watching.set()
            for command in monitor.listen():
                if command["db"] == self.db and not self._seen(command):
                    return

    def _seen(self, command: dict) -> bool:
        words = command["command"].split()
        name = words[0].upper() if words else ""
        who = (command.get("client_address"), command.get("client_port"))
        if name == "ECHO" and self.END in command["command"]:
            return False
        if name == "MULTI":
            self._open[who] = 0
        elif name == "RPUSH" and who in self._open and words[1] in self.keys:
            self._open[who] += 1
        elif name == "EXEC" and who in self._open:
            pushed = self._open.pop(who)
            if pushed:
                self.batches.append(pushed)
        return True

    def stop(self) -> list[int]:
        self.client.echo(self.END)
        self._thread.join(10)
        return self.batches


@pytest.mark.redis
def test_the_pieces_of_streams_due_together_go_out_together(alice, settings):
    # Twelve replies streaming at once, each piece slow to go out (a listener as slow as a loaded
    # channel layer): the flusher sends the pieces due together in one batch, stored in one
    # MULTI/EXEC round trip (watched on the real Redis with MONITOR) and published in one
    # hand-off to the channel layer; none is lost or out of order.
    client = redis.Redis.from_url(settings.REDIS_URL)
    turns = [claimed_turn(session_create(owner=alice, name=f"s{n}")) for n in range(12)]
    keys = {stream_key(turn_id=t.pk, attempt=1) for t in turns}
    heard: dict[int, list[events.Event]] = {t.pk: [] for t in turns}

    def slow(event: events.Event) -> None:
        if event["type"] == "message.delta" and event["turn"] in heard:
            heard[event["turn"]].append(event)
            time.sleep(0.005)

    watch = _PushWatch(client, keys)
    stops = [events.listen(t.session_id, slow) for t in turns]

    def reply(turn: Turn) -> None:
        with _stream(turn) as out:
            for n in range(120):
                out.add(f"{turn.pk}:{n} ")
                time.sleep(0.002)

    try:
        threads = [threading.Thread(target=reply, args=(t,)) for t in turns]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for stop in stops:
            stop()
        batches = watch.stop()
    for turn in turns:
        got = heard[turn.pk]
        assert "".join(e["delta"] for e in got) == "".join(f"{turn.pk}:{n} " for n in range(120))
        assert [e["seq"] for e in got] == list(range(1, len(got) + 1))
    assert sum(batches) == sum(len(got) for got in heard.values())  # every piece stored
    # Each stream's first piece goes out at once, and its last as it ends, on its own thread;
    # those between went out with others due at the same time.
    assert max(batches) >= 3, batches


def test_text_buffered_after_a_piece_goes_out_on_its_own_when_the_model_pauses(alice, session):
    turn = claimed_turn(session)
    second = threading.Event()
    heard: list[events.Event] = []

    def listener(event: events.Event) -> None:
        if event["type"] == "message.delta":
            heard.append(event)
            if event["seq"] == 2:
                second.set()

    stop = events.listen(session.pk, listener)
    try:
        with _stream(turn) as reply:
            reply.add("first ")  # the first piece goes out at once
            reply.add("second")  # within FLUSH_SECONDS of it: buffered
            # Neither flushed nor ended: the process's flushing thread sends it.
            assert second.wait(10)
    finally:
        stop()
    assert [(e["seq"], e["delta"]) for e in heard] == [(1, "first "), (2, "second")]


def test_a_new_attempt_starts_an_empty_stream(alice, session):
    turn = claimed_turn(session)
    store().append(stream_key(turn_id=turn.pk, attempt=1), "left from before")
    with _stream(turn) as reply:
        reply.add("fresh")
    assert stream_snapshot(turn_id=turn.pk, attempt=1).text == "fresh"


def test_the_integration_socket_gets_the_reply_so_far_then_fills_a_gap_from_the_store(
    alice, session
):
    turn = claimed_turn(session)
    key = stream_key(turn_id=turn.pk, attempt=1)
    with _stream(turn) as reply:
        for word in ("one ", "two "):
            reply.add(word)
            reply.flush()

    headers = socket_headers(alice)

    async def run() -> list[dict]:
        path = f"/ws/v1/sessions/{session.pk}/"
        sock = WebsocketCommunicator(application, path, headers=headers)
        assert (await sock.connect(timeout=5))[0]
        frames = [json.loads(await sock.receive_from(timeout=5))]

        def publish(delta: str, seq: int) -> None:
            events.message_delta(session=session.pk, turn=turn.pk, delta=delta, seq=seq, attempt=1)

        await database_sync_to_async(publish)("two ", 2)  # in the snapshot already
        assert await sock.receive_nothing(timeout=0.3)
        # Pieces 3 and 4 stored, their events lost; piece 5 brings them, in order.
        for piece in ("three ", "four ", "five "):
            await database_sync_to_async(store().append)(key, piece)
        await database_sync_to_async(publish)("five ", 5)
        frames += [json.loads(await sock.receive_from(timeout=5)) for _ in range(3)]
        assert await sock.receive_nothing(timeout=0.3)
        await sock.disconnect()
        return frames

    frames = async_to_sync(run)()
    assert frames[0] == {
        "type": "turn.snapshot",
        "session": session.pk,
        "turn": turn.pk,
        "text": "one two ",
        "seq": 2,
    }
    assert [(f["type"], f["seq"], f["delta"]) for f in frames[1:]] == [
        ("message.delta", 3, "three "),
        ("message.delta", 4, "four "),
        ("message.delta", 5, "five "),
    ]


def test_a_socket_ignores_the_pieces_of_an_attempt_taken_over(alice, session):
    turn = claimed_turn(session)

    headers = socket_headers(alice)

    async def run() -> list[dict]:
        path = f"/ws/v1/sessions/{session.pk}/"
        sock = WebsocketCommunicator(application, path, headers=headers)
        assert (await sock.connect(timeout=5))[0]
        await sock.receive_from(timeout=5)  # the (empty) snapshot

        def publish(delta: str, seq: int, attempt: int) -> None:
            events.message_delta(
                session=session.pk, turn=turn.pk, delta=delta, seq=seq, attempt=attempt
            )

        await database_sync_to_async(publish)("new ", 1, 2)
        await database_sync_to_async(publish)("stale ", 2, 1)  # the worker that lost the turn
        frames = [json.loads(await sock.receive_from(timeout=5))]
        assert await sock.receive_nothing(timeout=0.3)
        await sock.disconnect()
        return frames

    assert [(f["seq"], f["delta"]) for f in async_to_sync(run)()] == [(1, "new ")]


EVENTS = [
    {"type": "turn.started", "turn": 1, "branch": 1, "attempt": 1},
    {"type": "message.delta", "turn": 1, "delta": "hi", "seq": 1},
    {"type": "tool.started", "turn": 1, "tool": "calculate", "args": {}, "call_id": "c"},
    {"type": "tool.finished", "turn": 1, "tool": "calculate", "call_id": "c", "result": 4},
    {"type": "checkpoint.created", "checkpoint": 1, "branch": 1, "name": "x", "is_auto": False},
    {"type": "checkpoint.deleted", "checkpoints": [1]},
    {"type": "branch.changed", "branch": 1, "checkpoint": None, "deleted_checkpoints": []},
    {"type": "session.changed", "name": "Renamed", "archived": False, "metadata": {}},
    {"type": "turn.finished", "turn": 1, "status": "done", "reply": "hi", "tools_used": []},
    {"type": "turn.failed", "turn": 1, "error": "boom"},
    {"type": "turn.cancelled", "turn": 1},
]


# What the chat socket's path costs for one event (docs/architecture.md quotes it).
SOCKET_QUERIES_PER_EVENT = 1


@pytest.fixture
def socket_statements() -> Iterator[list[str]]:
    """Every statement of the sockets' database work, whichever thread of their pool runs it
    (web.ws.db): each of the pool's threads first closes its connections, so that each opens
    new ones, counted from their start (Django's connection_created)."""
    seen: list[str] = []

    def count(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    def counted(sender: object, connection: object, **kwargs: object) -> None:
        wrappers = connection.execute_wrappers  # type: ignore[attr-defined]
        if count not in wrappers:
            wrappers.append(count)

    everyone = threading.Barrier(THREADS, timeout=10)

    def close_this_threads() -> None:
        connections.close_all()
        everyone.wait()  # each of the pool's threads runs one of these

    connection_created.connect(counted)
    try:
        for done in [pool().submit(close_this_threads) for _ in range(THREADS)]:
            done.result(timeout=20)
        yield seen
    finally:
        connection_created.disconnect(counted)


@pytest.mark.parametrize("event", EVENTS, ids=[e["type"] for e in EVENTS])
def test_a_chat_socket_spends_one_query_on_each_event(
    alice, session, event, settings, socket_statements
):
    """Its access check, and nothing else. Counted over the chat socket's whole path for one
    event heard on the channel layer (rollback_event: the access check, here as when its last
    check is old; the relay; the render), on the connection its database calls run on. A page
    refresh sent after the event (its own access check alone) says when the socket is done."""
    settings.ROLLBACK_WS_ACCESS_CACHE_SECONDS = 0  # every event checks the access
    settings.ROLLBACK_WS_CATCH_UP_SECONDS = 3600  # no read-back of the turn meanwhile
    settings.ROLLBACK_WS_RECHECK_SECONDS = 3600  # nor a periodic check of the access
    turn = claimed_turn(session)
    event = {**event, "session": session.pk, "turn": turn.pk}
    headers = socket_headers(alice)
    # The consumer's database calls run on the sockets' pool (web.ws.db), all counted.
    layer = get_channel_layer()
    group = events.group_name(session.pk)
    done: events.PageMessage = {"type": "rollback.page", "session": session.pk}

    async def spent(sock: WebsocketCommunicator, *messages: object) -> tuple[list[str], str]:
        """The queries the socket ran for `messages` then `done`, and the frames it sent."""
        before = len(socket_statements)
        for message in messages:
            await layer.group_send(group, message)
        frames = ""
        while 'data-event="rollback.page"' not in (frame := await sock.receive_from(5)):
            frames += frame
        return socket_statements[before:], frames

    async def run() -> tuple[list[str], list[str], str]:
        sock = WebsocketCommunicator(application, f"/ws/chat/{session.pk}/", headers=headers)
        assert (await sock.connect(timeout=5))[0]
        await spent(sock, done)  # the socket has done connecting (it looked for a running turn)
        alone, _ = await spent(sock, done)
        both, frames = await spent(sock, {"type": "rollback.event", "event": event}, done)
        await sock.disconnect()
        return alone, both, frames

    alone, both, frames = async_to_sync(run)()
    assert len(alone) == 1, alone
    assert len(both) - len(alone) == SOCKET_QUERIES_PER_EVENT, both
    if event["type"] in ("turn.started", "turn.finished", "branch.changed", "checkpoint.created"):
        assert reverse("chat:refresh", args=[session.pk]) in frames  # fetched by the page


def test_the_sockets_checking_their_access_at_once_share_one_query(
    alice, settings, socket_statements
):
    """Six sockets of six sessions hear an event at the same moment, each checking its access
    first (web.ws.access): the first check waits for a thread of the sockets' pool (all busy
    here), the others are asked meanwhile and answered together, by one query for them all
    (not one each); each socket still delivers."""
    settings.ROLLBACK_WS_ACCESS_CACHE_SECONDS = 0
    settings.ROLLBACK_WS_CATCH_UP_SECONDS = 3600
    settings.ROLLBACK_WS_RECHECK_SECONDS = 3600
    sessions = [session_create(owner=alice, name=f"s{n}") for n in range(6)]
    headers = socket_headers(alice)
    layer = get_channel_layer()
    release = threading.Event()

    async def run() -> list[str]:
        socks = [
            WebsocketCommunicator(application, f"/ws/v1/sessions/{s.pk}/", headers=headers)
            for s in sessions
        ]
        for sock in socks:
            assert (await sock.connect(timeout=5))[0]
        await asyncio.sleep(0.2)  # each socket has done connecting (it looked for a turn)
        busy = [pool().submit(release.wait, 10) for _ in range(THREADS)]
        checks = access.checks_here()
        asked = checks.asked
        before = len(socket_statements)
        for s in sessions:
            event = {"type": "session.changed", "session": s.pk, "name": "n", "archived": False}
            message = {"type": "rollback.event", "event": event}
            await layer.group_send(events.group_name(s.pk), message)
        deadline = time.monotonic() + 10
        while checks.asked - asked < 6 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # each socket asks; the first waits for a thread
        release.set()
        for job in busy:
            job.result(timeout=10)
        frames = [json.loads(await sock.receive_from(timeout=5)) for sock in socks]
        for sock in socks:
            await sock.disconnect()
        assert [f["type"] for f in frames] == ["session.changed"] * 6
        return socket_statements[before:]

    try:
        statements = async_to_sync(run)()
    finally:
        release.set()
    assert 1 <= len(statements) <= 2, statements  # the first alone, or all six at once
    assert all("UNION ALL" in sql for sql in statements)


# What the send view's answer (the composer) costs once the turn is started (docs/architecture.md
# quotes it).
COMPOSER_QUERIES = 1


def test_sending_a_message_renders_only_the_composer(client, alice, session):
    client.force_login(alice)
    client.get(reverse("chat:session", args=[session.pk]))
    url = reverse("chat:send", args=[session.pk])
    with CaptureQueriesContext(connection) as queries:
        answer = client.post(url, {"message": "hello"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    body = answer.content.decode()
    assert 'id="composer"' in body
    assert 'id="messages"' not in body
    sql = [q["sql"] for q in queries.captured_queries]
    # The request's login, the session, the turn's start (its recovery checks, the message and
    # the turn: 19 here), then one query for the composer's state, where the whole conversation
    # was rendered before (27).
    committed = sql[-1 - COMPOSER_QUERIES]
    assert committed == "COMMIT" or committed.startswith("RELEASE SAVEPOINT"), sql
    assert len(sql) <= 22, sql


def test_in_memory_events_start_no_thread_or_loop_per_event(alice, session, monkeypatch):
    events.message_delta(session=session.pk, turn=1, delta="warm up", seq=1)
    started: list[str] = []
    start, new_loop = threading.Thread.start, asyncio.new_event_loop

    def counted_start(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    def counted_loop() -> asyncio.AbstractEventLoop:
        started.append("a new event loop")
        return new_loop()

    monkeypatch.setattr(threading.Thread, "start", counted_start)
    monkeypatch.setattr(asyncio, "new_event_loop", counted_loop)
    for n in range(2, 50):
        events.message_delta(session=session.pk, turn=1, delta="x", seq=n)
    assert started == []
