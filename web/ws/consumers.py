"""WebSocket consumers. They authenticate from the scope, check access through the ownership
helper, join the session's group and turn its events into frames. They never call the model
and never write to the database (they read to render).

A socket lives as long as its access, and no longer. It joins, besides its session's group, the
groups that `core.events` closes sockets through: its user's (the user deactivated, or the
password changed, which ends the user's browser logins), and its API key's (revoked) or its
browser login's (logged out); a deleted session closes its own group's sockets. And it checks
its access again itself, before each event it delivers and in full every
ROLLBACK_WS_RECHECK_SECONDS, so a socket whose access ended some other way (the login expired,
the database changed by hand, the session given to another user) closes too. A socket whose
access ended is closed, without the event, with code 4401 (`CLOSE_SIGNED_OUT`: logged out, key
revoked, user deactivated, login expired, password changed) or 4404 (`CLOSE_NOT_FOUND`: the
session is gone or no longer theirs), the codes that refuse such a handshake. The chat page's
page does not reconnect after those; it does after 4012 (`CLOSE_RECONNECT`), which the sockets
of the login that changed the password get, as that login goes on under a new key.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from typing import NoReturn

import redis.exceptions
from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.template.loader import render_to_string

from accounts.selectors import login_is_current
from agents.services import start_in_process_recovery
from core.errors import DomainError
from core.events import (
    CLOSE_NOT_FOUND,
    CLOSE_RECONNECT,
    CLOSE_SIGNED_OUT,
    apikey_group,
    group_name,
    login_group,
    remember_server_loop,
    user_group,
)
from sessions_app.models import ExternalSession, Turn
from sessions_app.partial import PARTIAL_WRITE_SECONDS, Partial, partial_get
from sessions_app.selectors import get_session_for_user, watch_access
from web import context as pages

log = logging.getLogger(__name__)

# How long a socket waits for the reply so far in the cache to cover a gap in the pieces it heard:
# the worker writes it at most PARTIAL_WRITE_SECONDS apart, checking every third of that.
GAP_WAIT_SECONDS = PARTIAL_WRITE_SECONDS * 4 / 3 + 0.15

# An error while checking a socket's access: the page's htmx reconnects after this code.
CLOSE_INTERNAL_ERROR = 1011


class SessionConsumer(AsyncWebsocketConsumer):
    """Joins the group of one of the user's sessions; another user's session is closed at once,
    before any event. Closes when its access ends (see the module's docstring)."""

    session: ExternalSession | None = None
    user_id: int | None = None
    api_key_id: int | None = None  # when opened with an API key
    login_key: str | None = None  # else the browser login's session key
    joined: tuple[str, ...] = ()
    closing = False
    checked_at = -math.inf  # when a check last passed (time.monotonic)
    rechecks: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_SIGNED_OUT)
        try:
            self.session = await database_sync_to_async(get_session_for_user)(
                user, self.scope["url_route"]["kwargs"]["pk"]
            )
        except DomainError:
            await self.refuse(CLOSE_NOT_FOUND)
        self.user_id = user.pk
        self.api_key_id = self.scope.get("api_key")
        if self.api_key_id is None:
            self.login_key = self.scope["session"].session_key
        remember_server_loop()
        start_in_process_recovery()
        self.joined = (group_name(self.session.pk), user_group(user.pk))
        if self.api_key_id is not None:
            self.joined += (apikey_group(self.api_key_id),)
        elif self.login_key:
            self.joined += (login_group(self.login_key),)
        await self.join_groups()
        # Checked again once in the groups: an access ending from now on is announced to them.
        if not await self.access_holds(full=True):
            await self.refuse(CLOSE_SIGNED_OUT)  # already closed with its own code
        await self.accept()
        self.rechecks = asyncio.create_task(self.recheck_periodically())

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
        groups it joined: nothing waits for the client's goodbye."""
        if not self.closing:
            self.closing = True
            await self.close(code=code)
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)
        raise StopConsumer()

    async def disconnect(self, code: int) -> None:
        self.closing = True
        if self.rechecks is not None:
            self.rechecks.cancel()
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Clients only listen; what they send is ignored."""

    async def rollback_close(self, message: dict) -> None:
        """A control message of `core.events`: this socket's access ended. One about the
        user's browser logins (the password changed) leaves the sockets of API keys open, and
        has those of the login that made the change reconnect under its new key."""
        code = message.get("code")
        if message.get("logins"):
            if self.api_key_id is not None:
                return
            keep = message.get("keep")
            if keep and self.login_key and login_group(self.login_key) == keep:
                await self.end(CLOSE_RECONNECT)
                return
        await self.end(code if code in (CLOSE_SIGNED_OUT, CLOSE_NOT_FOUND) else CLOSE_SIGNED_OUT)

    async def end(self, code: int) -> None:
        """Close the socket; nothing is sent after this."""
        if self.closing:
            return
        self.closing = True
        if self.rechecks is not None and self.rechecks is not asyncio.current_task():
            self.rechecks.cancel()
        await self.close(code=code)

    async def access_holds(self, *, full: bool = False) -> bool:
        """Whether the socket may still deliver events; when not, it is closed. A check that
        passed less than ROLLBACK_WS_ACCESS_CACHE_SECONDS ago answers, unless `full`."""
        if self.closing:
            return False
        now = time.monotonic()
        if not full and now - self.checked_at < settings.ROLLBACK_WS_ACCESS_CACHE_SECONDS:
            return True
        code = await database_sync_to_async(self.access_ended)(full=full)
        if code is not None:
            await self.end(code)
            return False
        self.checked_at = now
        return True

    def access_ended(self, *, full: bool) -> int | None:
        """The close code when the socket's access ended, else None. One query; `full` also
        checks that a browser's login is still current."""
        assert self.session is not None and self.user_id is not None
        access = watch_access(
            user_id=self.user_id, session_id=self.session.pk, api_key_id=self.api_key_id
        )
        if access == "signed_out":
            return CLOSE_SIGNED_OUT
        if access == "not_found":
            return CLOSE_NOT_FOUND
        if full and self.api_key_id is None:
            login = self.login_key
            if not login or not login_is_current(session_key=login, user_id=self.user_id):
                return CLOSE_SIGNED_OUT
        return None

    async def recheck_periodically(self) -> None:
        while not self.closing:
            await asyncio.sleep(settings.ROLLBACK_WS_RECHECK_SECONDS)
            try:
                await self.access_holds(full=True)
            except Exception:
                log.exception("could not check the access of a socket")
                await self.end(CLOSE_INTERNAL_ERROR)


class EventStreamConsumer(SessionConsumer):
    """`/ws/v1/sessions/{id}/`: the contract's JSON events, as they happen."""

    async def rollback_event(self, message: dict) -> None:
        if await self.access_holds():
            await self.send(text_data=json.dumps(message["event"]))


class ChatConsumer(SessionConsumer):
    """The chat page's socket: HTML fragments for htmx's ws extension (out-of-band swaps by id),
    rendered from the same partials as the page.

    A reply streams as numbered pieces (`seq`). A socket that connects mid-turn first sends the
    reply so far; when it then sees a piece with a gap before it (pieces sent before it joined,
    after the reply so far was last written), it holds the pieces back until the reply so far in
    the cache covers the gap, and sends that, then them. The page keeps the highest `seq` it has
    and skips the rest."""

    async def connect(self) -> None:
        self.sent: dict[int, int] = {}  # turn -> the highest seq this socket sent
        # turn -> the pieces held back while this socket fills a gap before them
        self.pending: dict[int, list[tuple[int, str]]] = {}
        self.healing: set[asyncio.Task[None]] = set()
        await super().connect()
        if self.closing or self.session is None:
            return
        found = await database_sync_to_async(running_partial)(self.session)
        if found is not None and found[1].seq:
            turn, partial = found
            self.sent[turn] = partial.seq
            await self.send(text_data=render_snapshot(turn, partial))

    async def rollback_event(self, message: dict) -> None:
        if not await self.access_holds():
            return
        event = message["event"]
        if event.get("type") == "message.delta" and isinstance(event.get("seq"), int):
            html = await self.delta(event)
            if html:
                await self.send(text_data=html)
            return
        if event.get("type") == "turn.started":  # a new attempt numbers its pieces from 1
            self.sent.pop(int(event["turn"]), None)
            self.pending.pop(int(event["turn"]), None)
        elif event.get("type") in ("turn.finished", "turn.failed", "turn.cancelled"):
            self.pending.pop(int(event["turn"]), None)  # the stored reply replaces the bubble
        try:
            html = await database_sync_to_async(render_event)(self.session, event)
        except DomainError:
            await self.end(CLOSE_NOT_FOUND)
            return
        if html:
            await self.send(text_data=html)

    async def delta(self, event: dict) -> str:
        """The frame for one numbered piece: nothing when this socket sent it already, or while
        it waits to fill a gap before it (pieces sent before it joined, or dropped), else the
        piece."""
        turn, seq = int(event["turn"]), int(event["seq"])
        if turn in self.pending:
            self.pending[turn].append((seq, event.get("delta") or ""))
            return ""
        have = self.sent.get(turn, 0)
        if seq <= have:
            return ""
        if seq == have + 1:
            self.sent[turn] = seq
            return render_delta(turn, event.get("delta") or "", seq)
        self.pending[turn] = [(seq, event.get("delta") or "")]
        self.healing.add(asyncio.create_task(self.fill_gap(turn)))
        return ""

    async def fill_gap(self, turn: int) -> None:
        """Once the reply so far in the cache covers the gap (it is at most PARTIAL_WRITE_SECONDS
        and a check behind), send it, then the pieces held back after it."""
        try:
            await asyncio.sleep(GAP_WAIT_SECONDS)
            assert self.session is not None
            partial = await database_sync_to_async(turn_partial)(self.session.pk, turn)
            pieces = self.pending.pop(turn, [])
            if self.closing or not pieces:
                return
            frames = []
            have = self.sent.get(turn, 0)
            if partial is not None and partial.seq >= pieces[0][0] - 1 and partial.seq > have:
                frames.append(render_snapshot(turn, partial))
                have = partial.seq
            for seq, text in pieces:  # the cache could not fill it: the pieces as they are
                if seq > have:
                    frames.append(render_delta(turn, text, seq))
                    have = seq
            self.sent[turn] = have
            for frame in frames:
                await self.send(text_data=frame)
        finally:
            task = asyncio.current_task()
            if task is not None:
                self.healing.discard(task)


def running_partial(session: ExternalSession) -> tuple[int, Partial] | None:
    """The running turn of the session and its reply so far, if a turn runs."""
    turn = Turn.objects.filter(session=session).active().order_by("-created_at").first()
    if turn is None or turn.status != Turn.Status.RUNNING:
        return None
    return turn.pk, partial_get(turn=turn)


def turn_partial(session_id: int, turn_id: int) -> Partial | None:
    """The reply so far of one of the session's turns."""
    turn = Turn.objects.filter(pk=turn_id, session_id=session_id).only("id", "attempts").first()
    return partial_get(turn=turn) if turn is not None else None


def render_delta(turn: int, delta: str, seq: int | None) -> str:
    context = {"turn": turn, "delta": delta, "seq": seq}
    return render_to_string("sessions_app/_stream_delta.html", context)


def render_snapshot(turn: int, partial: Partial) -> str:
    context = {"turn": turn, "partial": partial}
    return render_to_string("sessions_app/_stream_snapshot.html", context)


def render_event(session: ExternalSession, event: dict) -> str:
    """The page's fragments for one event, rendered from the page's own partials."""
    kind = event.get("type")
    if kind == "message.delta":
        return render_delta(int(event["turn"]), event.get("delta") or "", event.get("seq"))
    if kind == "tool.started":
        context = {"turn": int(event["turn"]), "tool": event.get("tool") or ""}
        return render_to_string("sessions_app/_stream_tool.html", context)
    if kind in ("checkpoint.created", "checkpoint.deleted"):
        session.refresh_from_db()
        return render_to_string("checkpoints/_panel_oob.html", pages.panel_live(session))
    if kind == "turn.cancelled":  # what was streamed stays on the page, marked stopped
        context = {**pages.composer_state(session), "turn": int(event["turn"])}
        return render_to_string("sessions_app/_turn_stopped.html", context)
    if kind == "session.changed":  # renamed (by hand or by the automatic title), archived
        session.refresh_from_db()
        context = {**pages.conversation(session), "s": session, "oob": True}
        return render_to_string("sessions_app/_session_changed.html", context)
    if kind in ("turn.started", "turn.finished", "turn.failed", "branch.changed"):
        session.refresh_from_db()
        context = {**pages.conversation(session), **pages.panel_live(session)}
        return render_to_string("sessions_app/_refresh.html", context)
    return ""
