"""How a socket relays a session's turns: every piece of a reply once and in order, a turn's
start and end once, and what the channel layer lost read back by the socket itself.

The channel layer is best-effort (it drops what comes past its capacity: core.channel_layers), so
no socket depends on it for a reply's pieces or a turn's end. A piece heard after a gap comes with
the missing ones, read from the stream's store (sessions_app.reply_stream) at once. While the socket
watches a running turn (from its snapshot, its start or any event of it), each
ROLLBACK_WS_CATCH_UP_SECONDS in which it heard nothing of the turn it reads the turn back: one
query by primary key (sessions_app.watch) and one read of the store, sending the pieces it has
not sent, a take-over's start, and the end, rebuilt from the database as the worker sent it. An
end is preceded by any stored piece not yet sent. One sender at a time (the event handler or the
catch-up, under `output`), so nothing goes out twice or out of order. A piece of a turn whose
start never came brings the start first (the chat page then fetches the turn's bubble), and the
socket's full recheck looks for a running turn of which every event was lost. Reads only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import cast

import redis.exceptions
from asgiref.sync import sync_to_async
from django.conf import settings

from core.events.payloads import Event, EventMessage, MessageDelta, TurnStarted
from sessions_app.models import Session
from sessions_app.reply_stream import stream_read
from sessions_app.watch import Progress, running_turn, turn_end_event, turn_progress
from web.ws.db import socket_db

log = logging.getLogger("web.ws.consumers")

# The events of a running turn: a socket that hears one watches the turn (catch-up).
OF_A_RUNNING_TURN = (
    "message.delta",
    "tool.started",
    "tool.output",
    "tool.finished",
    "tool.approval_requested",
    "tool.approval_answered",
)


class TurnRelay:
    """The consumers' relaying of turns (a mixin of SessionConsumer): they say how a piece and an
    event are framed (`send_pieces`, `send_event`) and whether the socket's access holds."""

    session: Session | None = None
    closing = False

    # Whether a `turn.started` this socket already sent (or whose turn it already showed from
    # its snapshot) is sent again: the chat page's is a harmless refresh.
    repeats_starts = False

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # the consumer's
        self.sent: dict[int, tuple[int, int]] = {}  # turn -> (attempt, the last seq sent)
        self.started: dict[int, int] = {}  # turn -> the last attempt whose start was sent
        self.ended: set[int] = set()  # turns whose end was sent: nothing of them follows
        # The running turns this socket reads back every ROLLBACK_WS_CATCH_UP_SECONDS, and when
        # it last heard of each (time.monotonic).
        self.watched: dict[int, float] = {}
        self.catching_up: asyncio.Task[None] | None = None
        # One sender at a time (an event, the catch-up), so that pieces go out in order, once.
        self.output = asyncio.Lock()

    async def access_holds(self, *, full: bool = False) -> bool:
        raise NotImplementedError

    async def send_event(self, event: Event, origin: str | None = None) -> None:
        """One event, as this socket's frames say it (`origin`: the tab whose request made the
        change, core.origin)."""

    async def send_pieces(self, turn: int, attempt: int, pieces: list[tuple[int, str]]) -> None:
        """Numbered pieces of a turn attempt's reply, in order, as this socket's frames say them."""

    async def rollback_event(self, message: EventMessage) -> None:
        if not await self.access_holds():
            return
        async with self.output:
            await self.relay(message["event"], message.get("origin"))

    async def relay(self, event: Event, origin: str | None = None) -> None:
        """Send one event heard on the channel layer (or rebuilt from the database): a turn's
        start and end once, a piece once and in order (preceded by those missing), nothing of
        a turn after its end but what does not change its reply."""
        turn = cast("dict[str, object]", event).get("turn")
        if event["type"] == "turn.started":
            await self.relay_start(event, origin)
            return
        if (
            event["type"] == "turn.finished"
            or event["type"] == "turn.failed"
            or event["type"] == "turn.cancelled"
        ):
            await self.relay_end(event, origin)
            return
        if isinstance(turn, int) and event["type"] in OF_A_RUNNING_TURN:
            if turn in self.ended:
                if event["type"] == "message.delta":
                    return  # sent after the end (a stopped worker): not part of the reply
            else:
                known = max(self.sent.get(turn, (0, 0))[0], self.started.get(turn, 0))
                attempt = known or 1
                if event["type"] == "message.delta":
                    attempt = event.get("attempt") or 1
                if attempt > known:
                    await self.missed_start(turn)  # its (or its new attempt's) start never came
                self.watch(turn)
            if event["type"] == "message.delta" and "seq" in event:
                pieces = await self.pieces(event, event["seq"])
                if pieces:
                    await self.send_pieces(turn, event.get("attempt") or 1, pieces)
                return
        await self.send_event(event, origin)

    async def relay_start(self, event: TurnStarted, origin: str | None = None) -> None:
        turn, attempt = event["turn"], event["attempt"]
        if turn in self.ended:
            return
        if attempt <= self.started.get(turn, 0) and not self.repeats_starts:
            return
        self.started[turn] = max(attempt, self.started.get(turn, 0))
        sent = self.sent.get(turn)
        if sent is None or sent[0] < attempt:  # a new attempt numbers its pieces from 1
            self.sent[turn] = (attempt, 0)
        self.watch(turn)
        await self.send_event(event, origin)

    async def relay_end(self, event: Event, origin: str | None = None) -> None:
        turn = cast("dict[str, object]", event).get("turn")
        if not isinstance(turn, int) or turn in self.ended:
            return
        await self.fill(turn)  # the last pieces, if their events were lost, before the end
        self.ended.add(turn)
        self.watched.pop(turn, None)
        await self.send_event(event, origin)

    async def missed_start(self, turn: int) -> None:
        """A turn this socket heard of but whose start it never sent: its start, as the database
        has it (the chat page then fetches the turn's bubble)."""
        if self.session is None:
            return
        progress = await socket_db(turn_progress)(session_id=self.session.pk, turn_id=turn)
        if progress is not None and progress.attempt > 0:
            await self.relay_start(self.start_event(turn, progress))

    def start_event(self, turn: int, progress: Progress) -> TurnStarted:
        return {
            "type": "turn.started",
            "session": self.session.pk if self.session is not None else 0,
            "turn": turn,
            "branch": progress.branch,
            "attempt": progress.attempt,
        }

    async def fill(self, turn: int) -> None:
        """Send the pieces of the turn's attempt that the store has and this socket has not sent."""
        if turn not in self.sent:
            return
        attempt, have = self.sent[turn]
        stored = await self.stored(turn, attempt, have)
        if stored:
            self.sent[turn] = (attempt, have + len(stored))
            await self.send_pieces(
                turn, attempt, [(have + n, text) for n, text in enumerate(stored, 1)]
            )

    async def stored(self, turn: int, attempt: int, after: int) -> list[str]:
        """The stored pieces of a turn attempt after number `after`; none when the store is away
        (a later read brings them)."""
        try:
            return await sync_to_async(stream_read, thread_sensitive=False)(
                turn_id=turn, attempt=attempt, after=after
            )
        except redis.exceptions.RedisError:
            log.warning("could not read the stream of turn %s", turn, exc_info=True)
            return []

    def watch(self, turn: int) -> None:
        """Read the running turn back until its end reaches this socket."""
        if turn in self.ended or self.closing:
            return
        self.watched[turn] = time.monotonic()
        if self.catching_up is None:
            self.catching_up = asyncio.create_task(self.catch_up_periodically())

    async def catch_up_periodically(self) -> None:
        """While the socket watches a running turn: every ROLLBACK_WS_CATCH_UP_SECONDS, each
        watched turn it heard nothing of for as long is read back (`catch_up`). So the pieces
        and the end that the channel layer dropped reach it within about twice that."""
        every = settings.ROLLBACK_WS_CATCH_UP_SECONDS
        try:
            while self.watched and not self.closing:
                await asyncio.sleep(every)
                for turn, heard in list(self.watched.items()):
                    if time.monotonic() - heard < every:
                        continue  # heard of it meanwhile: still streaming
                    try:
                        await self.catch_up(turn)
                    except Exception:
                        log.warning("could not read turn %s back", turn, exc_info=True)
        finally:
            self.catching_up = None

    async def catch_up(self, turn: int) -> None:
        """What the socket missed of a watched turn: a new attempt's start, the pieces stored,
        the end (as the database has it). One query, and one read of the store."""
        if self.session is None:
            return
        progress = await socket_db(turn_progress)(session_id=self.session.pk, turn_id=turn)
        async with self.output:
            if progress is None or turn in self.ended:
                self.watched.pop(turn, None)
                return
            if not await self.access_holds():
                return
            if progress.attempt > self.sent.get(turn, (0, 0))[0]:
                await self.relay_start(self.start_event(turn, progress))  # a take-over unheard
            await self.fill(turn)
            if progress.ended:
                event = await socket_db(turn_end_event)(session_id=self.session.pk, turn_id=turn)
                if event is not None:
                    await self.relay_end(event)

    async def pieces(self, event: MessageDelta, seq: int) -> list[tuple[int, str]]:
        """The numbered pieces to send for one `message.delta` numbered `seq`: none when this
        socket sent it already, it alone when it follows the last one sent, else the missing ones
        (read from the stream's store) and it."""
        turn, delta = event["turn"], event["delta"]
        attempt = event.get("attempt") or 1
        sent_attempt, have = self.sent.get(turn, (attempt, 0))
        if attempt < sent_attempt:
            return []  # a worker that lost the turn: its pieces are not the reply
        if attempt > sent_attempt:
            have = 0
        if seq <= have:
            return []
        found: list[tuple[int, str]] = []
        if seq > have + 1:  # the store away: the piece as it is (a later read fills the gap)
            stored = await self.stored(turn, attempt, have)
            found = [(have + n, text) for n, text in enumerate(stored[: seq - have - 1], 1)]
        found.append((seq, delta))
        self.sent[turn] = (attempt, seq)
        return found

    async def look_for_a_running_turn(self) -> None:
        """A turn that runs and that this socket never heard of (every event of it lost so far):
        its start, and it is watched from now on (one query)."""
        if self.session is None or self.watched:
            return
        running = await socket_db(running_turn)(self.session.pk)
        if running is None:
            return
        turn = running[0]
        async with self.output:
            if turn not in self.ended and turn not in self.sent and turn not in self.started:
                await self.missed_start(turn)
                self.watch(turn)
