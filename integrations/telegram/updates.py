"""Handling one update Telegram delivered (in a task, after the webhook stored it; or by the
periodic sweep when no task took it): who the chat is, whether it is linked, and what its
message asks for (a link, a command or a turn). Bad input is answered with a short note or
ignored; nothing here raises for it. Claims and the sweep's questions are in `inbox`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction

from agents.dispatch import enqueue
from agents.services import chat_submit
from core.errors import DomainError
from integrations.models import TelegramChat, TelegramReply, TelegramUpdate
from sessions_app.errors import TurnInProgress

from . import client, inbox
from .commands import HELP, parse_command, run_command
from .conversations import awaiting_turn, session_key
from .errors import LinkAttemptsLimited
from .link_limits import link_attempt_start, link_attempts_spent
from .links import link_code_consume

log = logging.getLogger(__name__)

UPDATE_TASK = "integrations.telegram_update"
# The most updates one round of the sweep handles (the next round goes on).
SWEEP_BATCH = 50

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
    user_id: int | None  # the sender (`from.id`), when the message names one


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
    sender = _dict(message.get("from")).get("id")
    return Incoming(
        update_id=update_id,
        chat_id=chat_id,
        chat_type=str(chat.get("type") or ""),
        title=title,
        text=text if isinstance(text, str) else None,
        user_id=sender if isinstance(sender, int) and not isinstance(sender, bool) else None,
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
    an approval is handled at once instead: AT_ONCE); True when it was new. Telegram redelivers
    an update it saw no 200 for: one stored and handled (or being handled) is left alone, one
    that nobody handles (its task was never sent or lost) is handed over again, and the claim
    makes sure it is handled once. A link attempt from a chat whose attempts are spent is stored
    as handled and costs nothing more (link_limits)."""
    dropped = _link_attempt_dropped(update_id, payload)
    with transaction.atomic():
        update, created = inbox.update_store(update_id=update_id, payload=payload, handled=dropped)
        if not created and not inbox.update_waiting(update):
            return False
        if created and dropped:
            log.info("telegram: update %s: link attempts spent; dropped", update_id)
        elif _at_once(update_id, payload):
            transaction.on_commit(lambda: update_handle(update_id=update_id))
        else:
            transaction.on_commit(lambda: _send(update_id))
    return created


def _send(update_id: int) -> None:
    """Queue the update's task. Whatever stops it being sent (the broker unreachable or slow),
    the update is stored: the sweep handles it once it is TELEGRAM_UPDATE_RETRY_SECONDS old, so
    the webhook still answers 200 and Telegram has no reason to deliver it again."""
    try:
        enqueue(UPDATE_TASK, update_id)
    except Exception as exc:
        # One line, not a traceback per update, during an outage.
        log.warning(
            "telegram: update %s is stored but its task could not be sent (%s: %s); the "
            "periodic sweep handles it",
            update_id,
            type(exc).__name__,
            exc,
        )


def _at_once(update_id: int, payload: Any) -> bool:
    message = incoming(update_id, payload)
    command = parse_command(message.text) if message and message.text is not None else None
    return command is not None and command[0] in AT_ONCE


def _link_attempt_dropped(update_id: int, payload: Any) -> bool:
    """A `/start CODE` from a chat (or a sender) with no link attempt left."""
    message = incoming(update_id, payload)
    if message is None or message.text is None:
        return False
    command = parse_command(message.text)
    if command is None or command[0] != "start" or not command[1]:
        return False
    return link_attempts_spent(chat_id=message.chat_id, user_id=message.user_id)


def update_handle(*, update_id: int) -> None:
    """Handle the stored update once, whoever asks how many times."""
    update = inbox.update_claim(update_id=update_id)
    if update is not None:
        _handle_claimed(update)


def _handle_claimed(update: TelegramUpdate) -> None:
    """Handle an update this caller claimed, then mark it handled. An error of the handling is
    logged and ends it (a retry could send the same answers again); only a database that fails
    leaves the claim open, to be taken over once stale (TELEGRAM_UPDATE_CLAIM_SECONDS), as the
    claim of a process that died is: a turn is started once whatever the retries (its
    idempotency key is the update's), and after TELEGRAM_UPDATE_ATTEMPTS claims it is given up."""
    message = incoming(update.update_id, update.payload)
    try:
        if message is None:
            log.info("telegram: update %s is not a message; ignored", update.update_id)
        else:
            _handle(message)
    except DatabaseError:
        log.warning(
            "telegram: update %s: the database failed (claim %s of %s); it is tried again",
            update.update_id,
            update.attempts,
            settings.TELEGRAM_UPDATE_ATTEMPTS,
            exc_info=True,
        )
        return
    except Exception:
        log.exception("telegram: update %s failed", update.update_id)
    inbox.update_finish(update)


def updates_sweep() -> int:
    """The periodic job (beat's integrations.sweep_updates; without a broker, a round of the
    recovery thread): the stored updates no task handled are handled here, each claimed first,
    so a late task, a redelivery or another sweep never handles one twice. Updates out of claims
    or too old to answer are given up, with an error in the log. Returns how many it handled;
    nothing to do, and no query, while the bridge is off."""
    if not client.enabled():
        return 0
    for lost in inbox.updates_give_up():
        log.error(
            "telegram: update %s (received %s, claimed %s times) was never handled; given up",
            lost.update_id,
            lost.received_at.isoformat(),
            lost.attempts,
        )
    handled = 0
    for update_id in inbox.updates_due(limit=SWEEP_BATCH):
        update = inbox.update_claim(update_id=update_id)
        if update is None:  # a task (or another sweep) took it meanwhile
            continue
        log.warning(
            "telegram: update %s was handled by no task; the sweep handles it (claim %s)",
            update_id,
            update.attempts,
        )
        _handle_claimed(update)
        handled += 1
    return handled


def _handle(message: Incoming) -> None:
    command = parse_command(message.text) if message.text is not None else None
    if command is not None and command[0] == "start" and command[1]:
        _link(message, command[1])
        return
    if message.chat_type != "private":
        if command is not None:
            say(message.chat_id, PRIVATE_ONLY)
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
    """`/start CODE`: link the chat (or move it, linked to someone else, to the code's user).
    Each attempt counts, wherever it is sent (link_limits); past the limit the chat is told once
    when it may try again, then nothing."""
    try:
        attempt = link_attempt_start(chat_id=message.chat_id, user_id=message.user_id)
    except LinkAttemptsLimited as exc:
        if exc.first:
            say(message.chat_id, exc.message)
        return
    if message.chat_type != "private":
        say(message.chat_id, PRIVATE_ONLY)
        return
    try:
        chat = link_code_consume(code=code, chat_id=message.chat_id, title=message.title)
    except DomainError as exc:
        say(message.chat_id, exc.message)
        return
    attempt.succeeded()
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
