"""Handling one update Telegram delivered (in a task, after the webhook stored it): who the chat
is, whether it is linked, and what its message asks for (a link, a command or a turn). Bad input
is answered with a short note or ignored; nothing here raises for it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.dispatch import enqueue
from agents.services import chat_submit
from core.errors import DomainError
from integrations.models import TelegramChat, TelegramReply, TelegramUpdate
from sessions_app.errors import TurnInProgress

from . import client
from .commands import HELP, parse_command, run_command
from .conversations import awaiting_turn, session_key
from .links import link_code_consume

log = logging.getLogger(__name__)

UPDATE_TASK = "integrations.telegram_update"
# Handled updates are kept this long (Telegram redelivers for at most a day), then deleted.
KEEP_UPDATES = timedelta(days=3)

HOW_TO_LINK = (
    "This chat is not linked to a Rollback account. On your Rollback profile page, choose "
    '"Link a Telegram chat", then send the code here as /start CODE.'
)
PRIVATE_ONLY = "I work in private chats only: message me directly."
TEXT_ONLY = "I read text only: send your message as text."
DEACTIVATED = "The Rollback account linked to this chat is deactivated; nothing was done."
STILL_WRITING = "A reply is still being written; send your message again when it ends."
AWAITING_APPROVAL = (
    "The agent is waiting for your approval of a tool call: send /approve or /refuse (or answer "
    "in the web app), then send your message again."
)


@dataclass(frozen=True)
class Incoming:
    """What the bot reads of a message update."""

    update_id: int
    chat_id: int
    chat_type: str
    title: str
    text: str | None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def incoming(update_id: int, payload: Any) -> Incoming | None:
    """The message of a `message` update; None for every other kind (edits, channel posts,
    callbacks...) and for a message without a usable chat."""
    message = _dict(_dict(payload).get("message"))
    chat = _dict(message.get("chat"))
    chat_id = chat.get("id")
    if not isinstance(chat_id, int) or isinstance(chat_id, bool):
        return None
    names = (chat.get("username"), chat.get("title"), chat.get("first_name"))
    title = next((n for n in names if isinstance(n, str) and n), "")
    if chat.get("username") == title and title:
        title = f"@{title}"
    text = message.get("text")
    return Incoming(
        update_id=update_id,
        chat_id=chat_id,
        chat_type=str(chat.get("type") or ""),
        title=title,
        text=text if isinstance(text, str) else None,
    )


def say(chat_id: int, text: str) -> None:
    """Send a reply; a Telegram that refuses or cannot be reached is logged, not raised (the
    update is handled: sending it again would repeat what did happen)."""
    try:
        client.send_text(chat_id, text)
    except client.TelegramError:
        log.warning("telegram: could not answer chat %s", chat_id, exc_info=True)


# Commands handled in the webhook's request rather than by a task: answering a tool call that
# waits for approval. The turn that waits holds a worker (or a slot of the embedded pool) while
# it waits; the answer must not queue behind it and other waiting turns.
AT_ONCE = frozenset({"approve", "refuse"})


def update_receive(*, update_id: int, payload: dict[str, Any]) -> bool:
    """Store an update Telegram delivered and hand it to a task once committed (an answer to
    an approval is handled at once instead: AT_ONCE); False (nothing done) for one already
    stored: Telegram redelivers an update it saw no 200 for."""
    with transaction.atomic():
        _, created = TelegramUpdate.objects.get_or_create(
            update_id=update_id, defaults={"payload": payload}
        )
        if created and _at_once(update_id, payload):
            transaction.on_commit(lambda: update_handle(update_id=update_id))
        elif created:
            transaction.on_commit(lambda: enqueue(UPDATE_TASK, update_id))
    return created


def _at_once(update_id: int, payload: Any) -> bool:
    message = incoming(update_id, payload)
    command = parse_command(message.text) if message and message.text is not None else None
    return command is not None and command[0] in AT_ONCE


def update_claim(*, update_id: int) -> TelegramUpdate | None:
    """The stored update, claimed for handling by this caller (a conditional update of
    `handled_at`); None when another handler claimed it already or it is gone."""
    claimed = TelegramUpdate.objects.filter(pk=update_id, handled_at__isnull=True).update(
        handled_at=timezone.now()
    )
    if claimed != 1:
        return None
    return TelegramUpdate.objects.filter(pk=update_id).first()


def updates_prune() -> int:
    """Delete the updates received more than KEEP_UPDATES ago, so the table stays bounded."""
    deleted, _ = TelegramUpdate.objects.filter(
        received_at__lt=timezone.now() - KEEP_UPDATES
    ).delete()
    return deleted


def update_handle(*, update_id: int) -> None:
    """Handle the stored update once, whoever asks how many times."""
    update = update_claim(update_id=update_id)
    if update is None:
        return
    message = incoming(update.update_id, update.payload)
    if message is None:
        log.info("telegram: update %s is not a message; ignored", update_id)
        return
    try:
        _handle(message)
    except Exception:
        # Handled once: a retry could send the same answers or start a turn twice.
        log.exception("telegram: update %s failed", update_id)


def _handle(message: Incoming) -> None:
    command = parse_command(message.text) if message.text is not None else None
    if message.chat_type != "private":
        if command is not None:
            say(message.chat_id, PRIVATE_ONLY)
        return
    if command is not None and command[0] == "start" and command[1]:
        _link(message, command[1])
        return
    chat = TelegramChat.objects.select_related("user").filter(chat_id=message.chat_id).first()
    if chat is None:
        say(message.chat_id, HOW_TO_LINK)
        return
    if not chat.user.is_active:
        say(message.chat_id, DEACTIVATED)
        return
    if message.text is None:
        say(message.chat_id, TEXT_ONLY)
        return
    if command is not None:
        _command(chat, *command)
    else:
        _turn(chat, message)


def _link(message: Incoming, code: str) -> None:
    """`/start CODE`: link the chat (or move it, linked to someone else, to the code's user)."""
    try:
        chat = link_code_consume(code=code, chat_id=message.chat_id, title=message.title)
    except DomainError as exc:
        say(message.chat_id, exc.message)
        return
    say(
        message.chat_id,
        f"Linked to Rollback as {chat.user.get_username()}. Write to me and the agent answers; "
        f"your conversation is also in the web app.\n\n{HELP}",
    )


def _command(chat: TelegramChat, name: str, arg: str) -> None:
    try:
        answer = run_command(chat.user, chat.chat_id, name, arg)
    except DomainError as exc:
        answer = exc.message
    say(chat.chat_id, answer)


def _turn(chat: TelegramChat, message: Incoming) -> None:
    """The message as a turn of the chat's session; B's relay streams its reply into the chat
    (it follows every turn with a TelegramReply row, made here in the turn's transaction)."""
    try:
        with transaction.atomic():
            turn = chat_submit(
                owner=chat.user,
                session_key=session_key(chat.chat_id),
                message=message.text,
                idempotency_key=f"telegram-update:{message.update_id}",
            )
            TelegramReply.objects.get_or_create(turn=turn, defaults={"chat_id": chat.chat_id})
    except TurnInProgress:
        say(chat.chat_id, AWAITING_APPROVAL if _awaits_approval(chat) else STILL_WRITING)
        return
    except DomainError as exc:
        say(chat.chat_id, exc.message)
        return
    client.send_typing(chat.chat_id)


def _awaits_approval(chat: TelegramChat) -> bool:
    return awaiting_turn(user=chat.user, chat_id=chat.chat_id) is not None
