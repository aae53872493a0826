"""A channel layer that loses messages, as a best-effort transport may (channels_redis drops what
is sent past its capacity): the sockets must complete a turn from the store and the database."""

from __future__ import annotations

from typing import Any, ClassVar

from core.channel_layers import InMemoryChannelLayer


class LosingLayer(InMemoryChannelLayer):
    """The in-memory layer, except that what is sent to a session's group is lost while its
    type is in `LosingLayer.losing` (every message's while it holds "*")."""

    losing: ClassVar[set[str]] = {"*"}
    lost: ClassVar[list[dict[str, Any]]] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        event = message.get("event")
        kind = event.get("type") if isinstance(event, dict) else message.get("type")
        if group.startswith("rollback.session.") and ("*" in self.losing or kind in self.losing):
            LosingLayer.lost.append(message)
            return
        await super().group_send(group, message)
