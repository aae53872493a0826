"""WebSocket consumers. They authenticate from the scope, check access through the ownership
helper, join the session's group and turn its events into frames. They never call the model and
never write to the database (they read to render)."""

from __future__ import annotations

import json
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string

from agents.dispatch import start_in_process_recovery
from core.events import group_name, remember_server_loop

from . import pages
from .errors import DomainError
from .models import ExternalSession
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

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
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


def render_event(session: ExternalSession, event: dict) -> str:
    """The page's fragments for one event, rendered from the page's own partials."""
    kind = event.get("type")
    if kind == "message.delta":
        context = {"turn": int(event["turn"]), "delta": event.get("delta") or ""}
        return render_to_string("sessions_app/_stream_delta.html", context)
    if kind == "tool.started":
        context = {"turn": int(event["turn"]), "tool": event.get("tool") or ""}
        return render_to_string("sessions_app/_stream_tool.html", context)
    if kind in ("checkpoint.created", "checkpoint.deleted"):
        session.refresh_from_db()
        return render_to_string("checkpoints/_panel_oob.html", pages.panel(session))
    if kind in ("turn.started", "turn.finished", "turn.failed", "branch.changed"):
        session.refresh_from_db()
        context = {**pages.conversation(session), **pages.panel(session)}
        return render_to_string("sessions_app/_refresh.html", context)
    return ""
