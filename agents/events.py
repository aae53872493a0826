"""Turn events, published to the session's channel group; consumers only relay them.

Event types are those of the public contract: turn.started, message.delta, tool.started,
tool.finished, checkpoint.created, branch.changed, turn.finished, turn.failed.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)


def group_name(session_id: int) -> str:
    return f"rollback.session.{session_id}"


def publish(session_id: int, event: dict) -> None:
    """Send one event to everyone watching the session. Never fails the caller."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(
            group_name(session_id), {"type": "rollback.event", "event": event}
        )
    except Exception:  # a lost event must not lose the turn; the database has the truth
        log.warning("could not publish %s for session %s", event.get("type"), session_id)
