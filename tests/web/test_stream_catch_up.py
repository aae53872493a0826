"""A socket never depends on the channel layer (best-effort: it drops what is sent past its
capacity) for what a reader must have: it reads the pieces and the turn's end it missed back from
the stream's store and the database by itself, in order and once."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings

from rollback_site.asgi import application
from sessions_app.models import Turn
from sessions_app.reply_stream import ReplyStream
from sessions_app.turns import turn_claim, turn_finish
from tests.fakes.layers import LosingLayer
from tests.sockets import claimed_turn, socket_headers

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = [f"w{n} " for n in range(30)]


@pytest.fixture
def losing(settings):
    """The channel layer loses what is sent to the sessions' groups (all of it, to begin with)."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "tests.fakes.layers.LosingLayer"}}
    LosingLayer.losing = {"*"}
    LosingLayer.lost = []
    yield LosingLayer
    LosingLayer.losing = {"*"}


def _stream(turn: Turn, words: list[str]) -> None:
    """The worker's side: each word a piece, stored, then published."""
    with ReplyStream(session_id=turn.session_id, turn_id=turn.pk, attempt=turn.attempts) as reply:
        for word in words:
            reply.add(word)
            reply.flush()


def _finish(turn: Turn) -> None:
    assert turn_finish(turn=turn, reply="".join(WORDS).strip(), tools_used=[])


async def _frames_until(ws: WebsocketCommunicator, done) -> list[dict]:
    frames: list[dict] = []
    while not frames or not done(frames[-1]):
        frames.append(json.loads(await ws.receive_from(timeout=20)))
    return frames


def _pieces(frames: list[dict]) -> list[tuple[int, str]]:
    return [(f["seq"], f["delta"]) for f in frames if f["type"] == "message.delta"]


def test_an_integration_socket_gets_every_piece_and_the_end_when_every_event_is_lost(
    losing, alice, session
):
    turn = claimed_turn(session)
    headers = socket_headers(alice)

    async def run() -> list[dict]:
        ws = WebsocketCommunicator(application, f"/ws/v1/sessions/{session.pk}/", headers=headers)
        assert (await ws.connect(timeout=5))[0]
        frames = [json.loads(await ws.receive_from(timeout=5))]  # the reply so far: nothing
        await sync_to_async(_stream, thread_sensitive=False)(turn, WORDS)
        await database_sync_to_async(_finish)(turn)
        frames += await _frames_until(ws, lambda f: f["type"] == "turn.finished")
        # Nothing more: no piece twice, no second end (the catch-up goes on a little longer).
        assert await ws.receive_nothing(timeout=3 * settings.ROLLBACK_WS_CATCH_UP_SECONDS)
        await ws.disconnect()
        return frames

    frames = async_to_sync(run)()
    assert frames[0] == {
        "type": "turn.snapshot",
        "session": session.pk,
        "turn": turn.pk,
        "text": "",
        "seq": 0,
    }
    assert _pieces(frames) == [(n, word) for n, word in enumerate(WORDS, 1)]
    end = frames[-1]
    assert end["turn"] == turn.pk
    assert end["reply"] == "".join(WORDS).strip()
    assert end["finish_reason"] is None
    assert [f["type"] for f in frames if f["type"] != "message.delta"] == [
        "turn.snapshot",
        "turn.finished",
    ]
    lost = [m["event"]["type"] for m in losing.lost]
    assert lost.count("message.delta") == len(WORDS)
    assert "turn.finished" in lost


def test_a_socket_gets_the_last_pieces_whose_events_were_lost_while_the_turn_runs(
    losing, alice, session
):
    losing.losing = set()
    headers = socket_headers(alice)

    async def run() -> list[dict]:
        ws = WebsocketCommunicator(application, f"/ws/v1/sessions/{session.pk}/", headers=headers)
        assert (await ws.connect(timeout=5))[0]
        turn = await database_sync_to_async(claimed_turn)(session)
        frames = [json.loads(await ws.receive_from(timeout=5))]  # turn.started
        await sync_to_async(_stream, thread_sensitive=False)(turn, WORDS[:3])
        losing.losing = {"message.delta"}  # the last pieces' events are lost; no piece follows
        await sync_to_async(_stream_more, thread_sensitive=False)(turn, WORDS[3:5])
        frames += await _frames_until(ws, lambda f: f.get("seq") == 5)
        await ws.disconnect()
        return frames

    frames = async_to_sync(run)()
    assert frames[0]["type"] == "turn.started"
    assert _pieces(frames) == [(n, word) for n, word in enumerate(WORDS[:5], 1)]
    assert len(losing.lost) == 2


def _stream_more(turn: Turn, words: list[str]) -> None:
    """More pieces of the same attempt (a ReplyStream starts its attempt's stream empty)."""
    from core import events
    from sessions_app.reply_stream import store, stream_key

    for word in words:
        seq = store().append(stream_key(turn_id=turn.pk, attempt=turn.attempts), word)
        events.message_delta(
            session=turn.session_id, turn=turn.pk, delta=word, seq=seq, attempt=turn.attempts
        )


def test_a_chat_socket_finds_a_turn_it_never_heard_of_and_gets_its_pieces_and_end(
    losing, settings, alice, session
):
    settings.ROLLBACK_WS_RECHECK_SECONDS = 1  # its next full check finds the turn running
    headers = socket_headers(alice)

    async def run() -> list[str]:
        chat = WebsocketCommunicator(application, f"/ws/chat/{session.pk}/", headers=headers)
        assert (await chat.connect(timeout=5))[0]
        turn = await database_sync_to_async(claimed_turn)(session)
        await sync_to_async(_stream, thread_sensitive=False)(turn, WORDS)
        frames = []
        while f'data-seq="{len(WORDS)}"' not in "".join(frames):
            frames.append(await chat.receive_from(timeout=20))
        await database_sync_to_async(_finish)(turn)
        frames.append(await chat.receive_from(timeout=20))
        await chat.disconnect()
        return frames

    frames = async_to_sync(run)()
    assert 'id="live-refresh"' in frames[0]  # its start: the page fetches the turn's bubble
    assert 'data-event="turn.started"' in frames[0]
    streamed = "".join(frames[1:-1])
    for n, word in enumerate(WORDS, 1):
        assert f'data-seq="{n}" data-attempt="1">{word}</span>' in streamed
    assert streamed.count("<span") == len(WORDS)
    assert 'data-event="turn.finished"' in frames[-1]  # its end: the page fetches the stored reply


def test_a_take_over_whose_start_was_lost_is_announced_before_its_first_piece(
    losing, settings, alice, session
):
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.turns import turn_recover_stale

    losing.losing = {"turn.started"}
    turn = claimed_turn(session)
    _stream(turn, WORDS[:3])
    headers = socket_headers(alice)

    def take_over() -> Turn:
        Turn.objects.filter(pk=turn.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
        assert turn_recover_stale(session_id=session.pk).requeued
        again = turn_claim(turn_id=turn.pk)
        assert again is not None
        assert again.attempts == 2
        return again

    async def run() -> list[dict]:
        ws = WebsocketCommunicator(application, f"/ws/v1/sessions/{session.pk}/", headers=headers)
        assert (await ws.connect(timeout=5))[0]
        frames = [json.loads(await ws.receive_from(timeout=5))]  # attempt 1's reply so far
        second = await database_sync_to_async(take_over)()
        await sync_to_async(_stream, thread_sensitive=False)(second, ["again "])
        frames += await _frames_until(ws, lambda f: f["type"] == "message.delta")
        await ws.disconnect()
        return frames

    frames = async_to_sync(run)()
    assert [(f["type"], f.get("seq"), f.get("attempt")) for f in frames] == [
        ("turn.snapshot", 3, None),
        ("turn.started", None, 2),
        ("message.delta", 1, 2),
    ]
    assert frames[-1]["delta"] == "again "
