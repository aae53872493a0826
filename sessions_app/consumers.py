"""WebSocket consumers. They authenticate from the scope, check access through the ownership
helper, join the session's group and turn its events into frames. They never call the model and
never write to the database (they read to render)."""

from __future__ import annotations

import json
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string
from django.utils.html import escape

from agents.dispatch import start_in_process_recovery
from core.events import group_name, remember_server_loop

from . import pages
from .errors import DomainError
from .selectors import get_session_for_user

log = logging.getLogger(__name__)


class SessionConsumer(AsyncWebsocketConsumer):
    """Joins the group of one of the user's sessions; another user's session is closed at once,
    before any event."""

    session = None
    group: str | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        try:
            self.session = await database_sync_to_async(get_session_for_user)(
                user, self.scope["url_route"]["kwargs"]["pk"]
            )
        except DomainError:
            await self.close(code=4404)
            return
        remember_server_loop()
        start_in_process_recovery()
        self.group = group_name(self.session.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None) -> None:
        """Clients only listen; what they send is ignored."""


class EventStreamConsumer(SessionConsumer):
    """`/ws/v1/sessions/{id}/`: the contract's JSON events, as they happen."""

    async def rollback_event(self, message: dict) -> None:
        await self.send(text_data=json.dumps(message["event"]))


class ChatConsumer(SessionConsumer):
    """The chat page's socket: HTML fragments for htmx's ws extension (out-of-band swaps by id),
    rendered from the same partials as the page."""

    async def rollback_event(self, message: dict) -> None:
        try:
            html = await database_sync_to_async(render_event)(self.session, message["event"])
        except DomainError:
            await self.close()
            return
        if html:
            await self.send(text_data=html)


def render_event(session, event: dict) -> str:
    kind = event.get("type")
    turn = event.get("turn")
    if kind == "message.delta":
        return (
            f'<div id="turn-{int(turn)}-body" hx-swap-oob="beforeend">'
            f"{escape(event.get('delta') or '')}</div>"
        )
    if kind == "tool.started":
        tool = escape(event.get("tool") or "")
        return (
            f'<div id="turn-{int(turn)}-tools" hx-swap-oob="beforeend">'
            f'<div class="muted" data-testid="tool-running">running {tool}…</div></div>'
        )
    if kind in ("checkpoint.created", "checkpoint.deleted"):
        session.refresh_from_db()
        context = pages.panel(session)
        inner = render_to_string("checkpoints/_panel.html", context)
        return f'<aside class="sidepanel" id="side-panel" hx-swap-oob="true">{inner}</aside>'
    if kind in ("turn.started", "turn.finished", "turn.failed", "branch.changed"):
        session.refresh_from_db()
        context = {**pages.conversation(session), **pages.panel(session)}
        return render_to_string("sessions_app/_refresh.html", context)
    return ""
