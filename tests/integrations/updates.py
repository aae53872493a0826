"""Building Telegram updates and posting them to the webhook, as Telegram does, for the bridge's
tests (test_webhook, test_linking, test_commands, test_turns_from_telegram)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from tests.integrations.conftest import WEBHOOK_SECRET

WEBHOOK = "/integrations/telegram/webhook/"
CHAT = 424242
_ids = itertools.count(1000)


def message(
    text: str | None = None,
    *,
    chat_id: int = CHAT,
    chat_type: str = "private",
    username: str = "alice_tg",
    update_id: int | None = None,
    kind: str = "message",
    **extra: Any,
) -> dict[str, Any]:
    """A `message` update (or `kind`: edited_message, channel_post...) of the chat."""
    body: dict[str, Any] = {
        "message_id": next(_ids),
        "date": 1_700_000_000,
        "chat": {"id": chat_id, "type": chat_type, "username": username, "first_name": "Al"},
        "from": {"id": chat_id, "is_bot": False, "first_name": "Al"},
        **extra,
    }
    if text is not None:
        body["text"] = text
    return {"update_id": update_id if update_id is not None else next(_ids), kind: body}


def post(client, update: Any, *, secret: str | None = WEBHOOK_SECRET, raw: bytes | None = None):
    headers = {} if secret is None else {"HTTP_X_TELEGRAM_BOT_API_SECRET_TOKEN": secret}
    data = raw if raw is not None else json.dumps(update).encode()
    return client.post(WEBHOOK, data=data, content_type="application/json", **headers)


def said(telegram, chat_id: int = CHAT) -> list[str]:
    """The texts the bot sent to the chat with sendMessage, in order."""
    return [c.params["text"] for c in telegram.sent("sendMessage", chat_id=chat_id)]
