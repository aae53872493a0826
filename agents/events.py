"""Turn events, published to the session's channel group; consumers only relay them.

Event types are those of the public contract: turn.started, message.delta, tool.started,
tool.finished, checkpoint.created, branch.changed, turn.finished, turn.failed.
"""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

log = logging.getLogger(__name__)

# The in-memory channel layer lives on the web server's event loop. A turn running on a thread of
# the same process publishes onto that loop (the consumers note it when they connect); with Redis
# any thread or process can publish directly.
_server_loop: asyncio.AbstractEventLoop | None = None


def remember_server_loop() -> None:
    """Called from async code (a consumer's connect) on the server's loop."""
    global _server_loop
    _server_loop = asyncio.get_running_loop()


def _on_server_loop(layer, group: str, message: dict) -> bool:
    loop = _server_loop
    if not isinstance(layer, InMemoryChannelLayer) or loop is None or loop.is_closed():
        return False
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        return False
    asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop).result(timeout=5)
    return True


def group_name(session_id: int) -> str:
    return f"rollback.session.{session_id}"


def publish(session_id: int, event: dict) -> None:
    """Send one event to everyone watching the session. Never fails the caller."""
    layer = get_channel_layer()
    if layer is None:
        return
    group, message = group_name(session_id), {"type": "rollback.event", "event": event}
    try:
        if not _on_server_loop(layer, group, message):
            async_to_sync(layer.group_send)(group, message)
    except Exception:  # a lost event must not lose the turn; the database has the truth
        log.warning("could not publish %s for session %s", event.get("type"), session_id)
