"""The streamed reply is never lost: numbered pieces stored before they are sent, the reply so far
shown by every render of a running turn and sent to a socket that connects mid-turn, a gap read
back from the store at once, and the chat socket's frames linear in the reply's length."""

from __future__ import annotations

import html
import re

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.urls import reverse

from agents.worker import run_turn
from core import events
from rollback_site.asgi import application
from sessions_app.models import Turn
from sessions_app.reply_stream import ReplyStream, Snapshot, stream_snapshot
from sessions_app.turns import turn_claim, turn_start
from tests.fakes.chat_server import Reply
from tests.sockets import socket_headers

pytestmark = pytest.mark.django_db(transaction=True)

PIECE = re.compile(
    r'<div id="turn-(\d+)-body" hx-swap-oob="beforeend">'
    r'<span class="delta"( data-snapshot)? data-seq="(\d+)"(?: data-attempt="\d+")?( hidden)?>'
    r"([^<]*)</span></div>"
)


def _running(session, text: str = "") -> Turn:
    """A running turn of `session` whose worker has streamed `text` so far (word by word)."""
    queued = turn_start(session=session, message="question")
    turn = turn_claim(turn_id=queued.pk)
    assert turn is not None
    with _stream(turn) as reply:
        for word in re.findall(r"\S*\s*", text):
            if word:
                reply.add(word)
                reply.flush()  # one piece a word
    return turn


def _stream(turn: Turn) -> ReplyStream:
    return ReplyStream(session_id=turn.session_id, turn_id=turn.pk, attempt=turn.attempts)


def test_the_chat_socket_sends_bytes_linear_in_a_2000_token_reply(fake_llm, alice, session):
    words = [f"w{n % 97} " for n in range(2000)]
    reply = "".join(words).strip()
    # As a model streams (not all at once: the in-memory channel layer holds 100 messages).
    fake_llm.queue(Reply(reply, delay=0.002))

    headers = socket_headers(alice)

    async def run() -> list[str]:
        chat = WebsocketCommunicator(application, f"/ws/chat/{session.pk}/", headers=headers)
        assert (await chat.connect(timeout=5))[0]
        turn = await database_sync_to_async(turn_start)(session=session, message="long")
        # On a thread of its own, as a worker would: the consumer's database calls go on meanwhile.
        await sync_to_async(run_turn, thread_sensitive=False)(turn.pk)
        frames = []
        while not await chat.receive_nothing(timeout=2):  # the turn ran: its frames are queued
            frames.append(await chat.receive_from(timeout=1))
        await chat.disconnect()
        return frames

    frames = async_to_sync(run)()
    pieces = [p for f in frames for p in PIECE.finditer(f)]
    streamed = "".join(html.unescape(p.group(5)) for p in pieces)
    assert streamed.strip() == reply  # every piece arrived once, in order
    seqs = [int(p.group(3)) for p in pieces]
    assert seqs == list(range(1, len(seqs) + 1))
    # Each piece costs its own text plus a small constant (about 90 bytes): never the text so
    # far again, which would be some 2000 times the reply.
    assert all(len(p.group(0)) <= len(html.escape(p.group(5))) + 120 for p in pieces)
    assert sum(len(f.encode()) for f in frames) <= 30 * len(reply) + 30_000


def test_the_worker_keeps_the_reply_so_far_in_the_store_with_its_seq(alice, session):
    turn = _running(session, "Hello there, **you**")
    snapshot = stream_snapshot(turn_id=turn.pk, attempt=1)
    assert snapshot == Snapshot(text="Hello there, **you**", seq=3)


def test_a_page_rendered_mid_turn_shows_the_reply_so_far_as_markdown(client, alice, session):
    _running(session, "Hello **there** <img src=x onerror=alert(1)>")
    client.force_login(alice)
    page = client.get(reverse("chat:session", args=[session.pk])).content.decode()
    bubble = page[page.index('data-streaming="true"') :]
    assert "Hello <strong>there</strong>" in bubble
    assert 'data-snapshot data-seq="5" hidden>Hello **there** &lt;img' in bubble
    assert "<img" not in page
    assert "onerror=alert" not in page.replace("&lt;img src=x onerror", "")


def test_a_socket_connecting_mid_turn_first_gets_the_reply_so_far(alice, session):
    turn = _running(session, "one two three")

    headers = socket_headers(alice)

    async def run() -> str:
        chat = WebsocketCommunicator(application, f"/ws/chat/{session.pk}/", headers=headers)
        assert (await chat.connect(timeout=5))[0]
        frame = await chat.receive_from(timeout=5)
        await chat.disconnect()
        return frame

    found = PIECE.fullmatch(async_to_sync(run)().strip())
    assert found
    assert found.group(1) == str(turn.pk)
    assert found.group(2)
    assert (found.group(3), found.group(5)) == ("3", "one two three")


def test_the_chat_socket_skips_pieces_sent_and_fills_a_gap_from_the_store_at_once(alice, session):
    turn = _running(session, "one two three")  # seq 3 in the store

    headers = socket_headers(alice)

    async def run() -> list[str]:
        chat = WebsocketCommunicator(application, f"/ws/chat/{session.pk}/", headers=headers)
        assert (await chat.connect(timeout=5))[0]
        frames = [await chat.receive_from(timeout=5)]  # the reply so far, seq 3

        def publish(delta: str, seq: int) -> None:
            events.message_delta(session=session.pk, turn=turn.pk, delta=delta, seq=seq, attempt=1)

        await database_sync_to_async(publish)("three ", 3)  # had it: nothing is sent
        assert await chat.receive_nothing(timeout=0.3)
        await database_sync_to_async(publish)("four ", 4)
        frames.append(await chat.receive_from(timeout=5))
        # Pieces 5 and 6 were stored, and their events lost: piece 7 brings them along.
        await database_sync_to_async(_store_more)(turn, ["five ", "six ", "seven "])
        await database_sync_to_async(publish)("seven ", 7)
        frames.append(await chat.receive_from(timeout=5))
        await chat.disconnect()
        return frames

    pieces = [p for f in async_to_sync(run)() for p in PIECE.finditer(f)]
    assert [(p.group(2), p.group(3), p.group(5)) for p in pieces] == [
        (" data-snapshot", "3", "one two three"),
        (None, "4", "four "),
        (None, "5", "five "),
        (None, "6", "six "),
        (None, "7", "seven "),
    ]


def _store_more(turn: Turn, pieces: list[str]) -> None:
    """Pieces the worker stored (after piece 4), whose events the socket never heard."""
    from sessions_app.reply_stream import store, stream_key

    key = stream_key(turn_id=turn.pk, attempt=turn.attempts)
    store().append(key, "four ")
    for piece in pieces:
        store().append(key, piece)
