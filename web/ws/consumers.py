"""WebSocket consumers. They authenticate from the scope, check access through the ownership
helper, join the session's group and turn its events into frames. They never call the model
and never write to the database (they read to render).

A socket lives as long as its access, and no longer. It joins, besides its session's group, the
groups that `core.events` closes sockets through: its user's (the user deactivated, or the password
changed, which ends the user's browser logins), and its API key's (revoked) or its browser login's
(logged out); a deleted session closes its own group's sockets. And it checks its access again
itself, before each event it delivers (a check at most ROLLBACK_WS_ACCESS_CACHE_SECONDS old; the
process's sockets checked at the same moment share one query: web.ws.access) and in full every
ROLLBACK_WS_RECHECK_SECONDS, so a socket whose access ended some other way (the login expired, the
database changed by hand, the session given to another user) closes too. A socket whose access ended
is closed, without the event, with code 4401 (`CLOSE_SIGNED_OUT`: logged out, key revoked, user
deactivated, login expired, password changed) or 4404 (`CLOSE_NOT_FOUND`: the session is gone or no
longer theirs); a handshake without that access is refused (the chat page's after accepting it, with
the same codes: see `tells_why_refused`). The chat page does not reconnect after those; it does
after 4012 (`CLOSE_RECONNECT`), which the sockets of the login that changed the password get, as
that login goes on under a new key.

A reply streams as numbered pieces (`message.delta` with `seq`, see sessions_app.reply_stream, which
stores each piece before it is published). Both sockets send a socket that connects mid-turn the
reply so far first (`turn.snapshot`), then the pieces it has not sent; what the channel layer
drops (a piece, a turn's start or end) the socket reads back itself (web/ws/relay.py). Each
event costs a socket at most two queries: the events that change more than a piece (a turn's
start or end, a branch, checkpoints) tell the chat page to fetch its refresh, once per event.
The chat page's socket knows its tab (`?tab=`, web.pages.tabs): an event of a change that tab
made itself, whose answer already brought the page's new state, has it fetch nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from typing import Any, NoReturn
from urllib.parse import parse_qs

import redis.exceptions
from asgiref.sync import sync_to_async
from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.template.loader import render_to_string

from access.selectors import may_use_api
from accounts.selectors import login_is_current
from core.errors import DomainError
from core.events.bus import apikey_group, group_name, login_group, user_group
from core.events.payloads import CloseMessage, Event, MessageDelta, PageMessage, SessionsMessage
from core.origin import clean_tab
from sessions_app.models import Session
from sessions_app.reply_stream import Snapshot, stream_snapshot
from sessions_app.selectors import get_session_for_user
from sessions_app.watch import running_turn
from web.chat_state import card_of
from web.ws.access import access_of
from web.ws.db import socket_db

from .codes import (
    CLOSE_ENDED,
    CLOSE_FORBIDDEN,
    CLOSE_INTERNAL_ERROR,
    CLOSE_NOT_FOUND,
    CLOSE_RECONNECT,
    CLOSE_SIGNED_OUT,
)
from .relay import TurnRelay

log = logging.getLogger(__name__)


# AsyncWebsocketConsumer is untyped.
class SessionConsumer(TurnRelay, AsyncWebsocketConsumer):  # type: ignore[misc,unused-ignore]
    """Joins the group of one of the user's sessions; another user's session is closed at once,
    before any event. Closes when its access ends (see the module's docstring)."""

    session: Session | None = None
    user_id: int | None = None
    api_key_id: int | None = None  # when opened with an API key
    login_key: str | None = None  # else the browser login's session key
    joined: tuple[str, ...] = ()
    closing = False
    # A refused handshake reaches a client as no code at all (a browser sees 1006), so a refusal
    # is an accepted socket closed at once with its code, before any event, for the consumers
    # whose clients act on the code; the others' handshakes are refused (HTTP 403).
    tells_why_refused = False
    checked_at = -math.inf  # when a check last passed (time.monotonic)
    rechecks: asyncio.Task[None] | None = None

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch, without the hop it makes before every message, each event of
        every socket, to asgiref's one thread for synchronous code to close that thread's old
        database connections. No handler here uses that thread's connections: every database
        call of a socket runs on the sockets' pool, which looks after its own (web.ws.db), and
        the handshake's authentication closes its own (Channels' database_sync_to_async). At a
        hundred streams that hop put every piece of every socket of the process in one queue,
        behind one thread."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_SIGNED_OUT)
        try:
            self.session = await socket_db(get_session_for_user)(
                user, self.scope["url_route"]["kwargs"]["pk"]
            )
        except DomainError:
            await self.refuse(CLOSE_NOT_FOUND)
        self.user_id = user.pk
        self.api_key_id = self.scope.get("api_key")
        if self.api_key_id is not None and not await socket_db(may_use_api)(user):
            await self.refuse(CLOSE_FORBIDDEN)
        if self.api_key_id is None:
            self.login_key = self.scope["session"].session_key
        self.joined = (group_name(self.session.pk), user_group(user.pk))
        if self.api_key_id is not None:
            self.joined += (apikey_group(self.api_key_id),)
        elif self.login_key:
            self.joined += (login_group(self.login_key),)
        await self.join_groups()
        # Checked again once in the groups: an access ending from now on is announced to them.
        if not await self.access_holds(full=True):
            await self.refuse(CLOSE_SIGNED_OUT)  # already closed with its own code
        # In the groups already: what is published from now on is queued behind the snapshot.
        # Looked up before the socket opens: a turn its client starts once it is open begins
        # with its `turn.started`, never with a snapshot of itself.
        running = await socket_db(running_turn)(self.session.pk)
        snapshot = None
        if running is not None:
            snapshot = await sync_to_async(stream_snapshot, thread_sensitive=False)(
                turn_id=running[0], attempt=running[1]
            )
        await self.accept()
        self.rechecks = asyncio.create_task(self.recheck_periodically())
        if running is not None and snapshot is not None:
            turn, attempt = running
            self.sent[turn] = (attempt, snapshot.seq)
            self.started[turn] = attempt
            await self.send_snapshot(turn, snapshot)
            self.watch(turn)

    async def send_snapshot(self, turn: int, snapshot: Snapshot) -> None:
        """The reply so far, to a socket that connected mid-turn."""

    async def join_groups(self) -> None:
        """Join the groups, within REDIS_COMMAND_TIMEOUT: a Redis that takes the connection and
        never answers would otherwise hold the handshake for the client's REDIS_SOCKET_TIMEOUT
        (which must outlast the layer's blocking reads). Its error ends the socket with "try
        again later" (web.ws.unavailable)."""
        try:
            async with asyncio.timeout(settings.REDIS_COMMAND_TIMEOUT):
                for group in self.joined:
                    await self.channel_layer.group_add(group, self.channel_name)
        except TimeoutError:
            raise redis.exceptions.TimeoutError("The channel layer did not answer.") from None

    async def refuse(self, code: int) -> NoReturn:
        """Close a socket that was never accepted and end this consumer at once, leaving the
        groups it joined: nothing waits for the client's goodbye. A consumer that
        `tells_why_refused` accepts the handshake first, so the client sees the code."""
        if not self.closing:
            self.closing = True
            if self.tells_why_refused:
                await self.accept()
            await self.close(code=code)
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)
        raise StopConsumer()

    async def disconnect(self, code: int) -> None:
        self.closing = True
        if self.rechecks is not None:
            self.rechecks.cancel()
        if self.catching_up is not None:
            self.catching_up.cancel()
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Clients only listen; what they send is ignored."""

    async def rollback_close(self, message: CloseMessage) -> None:
        """A control message of `core.events`: this socket's access ended. One about the
        user's browser logins (the password changed) leaves the sockets of API keys open, and
        has those of the login that made the change reconnect under its new key."""
        if message.get("logins"):
            if self.api_key_id is not None:
                return
            keep = message.get("keep")
            if keep and self.login_key and login_group(self.login_key) == keep:
                await self.end(CLOSE_RECONNECT)
                return
        await self.end(CLOSE_ENDED.get(message.get("ended", "signed_out"), CLOSE_SIGNED_OUT))

    async def rollback_sessions(self, message: SessionsMessage) -> None:
        """The user's list of sessions changed: only the chat page shows it (ChatConsumer)."""

    async def rollback_page(self, message: PageMessage) -> None:
        """The chat page should fetch its refresh: only the chat page acts on it (ChatConsumer);
        an integration's socket relays nothing of it."""

    async def end(self, code: int) -> None:
        """Close the socket; nothing is sent after this."""
        if self.closing:
            return
        self.closing = True
        if self.rechecks is not None and self.rechecks is not asyncio.current_task():
            self.rechecks.cancel()
        if self.catching_up is not None and self.catching_up is not asyncio.current_task():
            self.catching_up.cancel()
        await self.close(code=code)

    async def access_holds(self, *, full: bool = False) -> bool:
        """Whether the socket may still deliver events; when not, it is closed. A check that
        passed less than ROLLBACK_WS_ACCESS_CACHE_SECONDS ago answers, unless `full`."""
        if self.closing:
            return False
        now = time.monotonic()
        if not full and now - self.checked_at < settings.ROLLBACK_WS_ACCESS_CACHE_SECONDS:
            return True
        code = await self.access_ended(full=full)
        if code is not None:
            await self.end(code)
            return False
        self.checked_at = now
        return True

    async def access_ended(self, *, full: bool) -> int | None:
        """The close code when the socket's access ended, else None. One query, asked together
        with the other sockets' checks of the moment (web.ws.access); `full` also checks that a
        browser's login is still current."""
        if self.session is None or self.user_id is None:
            return CLOSE_NOT_FOUND
        access = await access_of(
            user_id=self.user_id, session_id=self.session.pk, api_key_id=self.api_key_id
        )
        if access == "signed_out":
            return CLOSE_SIGNED_OUT
        if access == "not_found":
            return CLOSE_NOT_FOUND
        if full and self.api_key_id is None:
            login = self.login_key
            if not login or not await socket_db(login_is_current)(
                session_key=login, user_id=self.user_id
            ):
                return CLOSE_SIGNED_OUT
        return None

    async def recheck_periodically(self) -> None:
        while not self.closing:
            await asyncio.sleep(settings.ROLLBACK_WS_RECHECK_SECONDS)
            try:
                if await self.access_holds(full=True):
                    await self.look_for_a_running_turn()
            except Exception:
                log.exception("could not check the access of a socket")
                await self.end(CLOSE_INTERNAL_ERROR)


class EventStreamConsumer(SessionConsumer):
    """`/ws/v1/sessions/{id}/`: the contract's JSON events, as they happen."""

    async def send_snapshot(self, turn: int, snapshot: Snapshot) -> None:
        frame = {
            "type": "turn.snapshot",
            "session": self.session.pk if self.session is not None else None,
            "turn": turn,
            "text": snapshot.text,
            "seq": snapshot.seq,
        }
        await self.send(text_data=json.dumps(frame))

    async def send_event(self, event: Event, origin: str | None = None) -> None:
        await self.send(text_data=json.dumps(event))

    async def send_pieces(self, turn: int, attempt: int, pieces: list[tuple[int, str]]) -> None:
        session = self.session.pk if self.session is not None else 0
        for seq, text in pieces:
            piece: MessageDelta = {
                "type": "message.delta",
                "session": session,
                "turn": turn,
                "delta": text,
                "seq": seq,
                "attempt": attempt,
            }
            await self.send(text_data=json.dumps(piece))


class ChatConsumer(SessionConsumer):
    """The chat page's socket: HTML fragments for htmx's ws extension (out-of-band swaps by id),
    rendered from the same partials as the page. The page (stream.js) also keeps the highest
    `seq` it has and skips the rest, so a page render and the socket never double a piece. A
    turn's start is always sent (it only has the page fetch its refresh)."""

    repeats_starts = True
    # The page must learn why: htmx's ws extension opens again, for ever, a socket closed with
    # 1006, which is all a browser sees of a refused handshake. With 4401 the page goes to the
    # sign-in (a login that ended while its socket was away: a restart, an outage's 4503), with
    # 4404 it stays closed (static/rollback/live.js).
    tells_why_refused = True
    tab: str | None = None  # the tab of the page that opened it (its `?tab=`)

    async def connect(self) -> None:
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.tab = clean_tab((query.get("tab") or [""])[0])
        await super().connect()

    async def send_snapshot(self, turn: int, snapshot: Snapshot) -> None:
        if snapshot.seq:
            await self.send(text_data=render_snapshot(turn, snapshot))

    async def send_pieces(self, turn: int, attempt: int, pieces: list[tuple[int, str]]) -> None:
        await self.send(
            text_data="".join(render_delta(turn, text, seq, attempt) for seq, text in pieces)
        )

    async def send_event(self, event: Event, origin: str | None = None) -> None:
        own = origin is not None and origin == self.tab
        if self.session is None or self.refreshes_later(event):
            return
        try:
            html = await socket_db(render_event)(self.session, event, own=own)
        except DomainError:
            await self.end(CLOSE_NOT_FOUND)
            return
        if html:
            await self.send(text_data=html)

    async def rollback_sessions(self, message: SessionsMessage) -> None:
        """A session of the user was made, changed or deleted, in this tab or any other, by any
        path: the page lists its sessions again (it fetches the list itself, keeping its search
        and its view). The page of a deleted session learns it from its socket's close."""
        if self.session is None or not await self.access_holds():
            return
        if message["change"] == "deleted" and message["session"] == self.session.pk:
            return
        await self.send(text_data=render_to_string("sessions_app/_sessions_refresh.html"))

    def refreshes_later(self, event: Event) -> bool:
        """An automatic checkpoint is made in the commit that ends a turn, just before that
        turn's end, which this socket is sure to send (it watches the turn: web/ws/relay.py) and
        which has the page fetch its refresh: one fetch for both."""
        return event["type"] == "checkpoint.created" and event["is_auto"] and bool(self.watched)

    async def rollback_page(self, message: PageMessage) -> None:
        """Something the page shows changed without an event of the contract (an
        administrator's notice dismissed in another tab): the page fetches its refresh (not
        the tab that made the change: its answer was the refresh)."""
        if self.session is None or not await self.access_holds():
            return
        if message.get("origin") is not None and message.get("origin") == self.tab:
            return
        context = {"session_id": self.session.pk, "event": {"type": "rollback.page"}}
        await self.send(text_data=render_to_string("sessions_app/_live_refresh.html", context))


def render_delta(turn: int, delta: str, seq: int | None, attempt: int | None = None) -> str:
    context = {"turn": turn, "delta": delta, "seq": seq, "attempt": attempt}
    return render_to_string("sessions_app/_stream_delta.html", context)


def render_snapshot(turn: int, partial: Snapshot) -> str:
    context = {"turn": turn, "partial": partial}
    return render_to_string("sessions_app/_stream_snapshot.html", context)


# The events after which the chat page fetches its refresh (its messages, composer, header and
# side panel: sessions_app/_refresh.html) itself: rendering it here cost every socket 11 queries.
REFRESHED = {
    "turn.started",
    "turn.finished",
    "turn.failed",
    "turn.cancelled",  # the reply shown so far is stored at once, marked stopped
    "branch.changed",
    "checkpoint.created",
    "checkpoint.deleted",
    "session.changed",
}


def render_event(session: Session, event: Event, *, own: bool = False) -> str:
    """The page's fragments for one event, rendered from the page's own partials, in at most
    two queries (none but the one a stopped turn's composer needs). `own`: the event of a change
    the page's tab made, whose answer brought the page's new state: nothing is fetched."""
    if event["type"] == "message.delta":
        return render_delta(event["turn"], event["delta"], event.get("seq"), event.get("attempt"))
    if event["type"] == "tool.started":
        context = {"turn": event["turn"], "tool": event["tool"]}
        return render_to_string("sessions_app/_stream_tool.html", context)
    if event["type"] == "tool.output":  # a running command's output, as it comes
        return render_to_string("sessions_app/_stream_output.html", dict(event))
    if event["type"] == "tool.approval_requested":  # the card, in every open tab
        card = card_of(event, event.get("note"))
        context = {"turn": event["turn"], "session_id": session.pk, "approval": card}
        return render_to_string("sessions_app/_approval_oob.html", context) + _refreshed(
            session, event, own
        )
    if event["type"] == "tool.approval_answered":  # answered here, elsewhere, or ended: it goes
        answered = render_to_string("sessions_app/_approval_oob.html", {"turn": event["turn"]})
        return answered + _refreshed(session, event, own)
    if event["type"] == "workspace.changed":  # only the Files panel's tree is fetched again
        if own:
            return ""
        return render_to_string("workspace/_files_reload.html", {"session_id": session.pk})
    if event["type"] in REFRESHED:
        return _refreshed(session, event, own)
    return ""


def _refreshed(session: Session, event: Event, own: bool = False) -> str:
    """The page fetches its refresh. After an approval's card too: a refresh the page asked for
    before the card came (at the turn's start) and answered after it would otherwise morph the
    card away (or back): a newer refresh replaces that fetch, whose older answer is then dropped
    (swaps.js). Not for the tab's own change (`own`): its answer was the refresh; a renamed
    session's link is named all the same."""
    context = {"session_id": session.pk, "event": event, "fetch": not own}
    if own and event["type"] != "session.changed":
        return ""
    return render_to_string("sessions_app/_live_refresh.html", context)
