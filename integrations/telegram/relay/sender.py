"""The relay's sender: one thread per process, which takes the queued events, looks up (or
adopts) the turns they concern, and shows each relayed turn's reply in its chat when the chat
may be edited again (integrations.telegram.relay's docstring says how)."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import OrderedDict

from django.db import close_old_connections, connections

from core.events import Event
from integrations.models import TelegramChat, TelegramReply
from integrations.telegram import client
from integrations.telegram.conversations import chat_of_key
from integrations.telegram.relay.show import Pace, deliver, stream
from integrations.telegram.relay.state import (
    ENDS,
    Reply,
    Unheard,
    edit_interval,
    note,
    retrying,
)
from sessions_app.models import Turn

log = logging.getLogger("integrations.telegram.relay")

THREAD_NAME = "telegram-relay"
FINAL_TRIES = 5  # 429s a final delivery waits out before it gives up
KNOWN_TURNS = 2000  # turns whose answer (relayed or not) is kept in memory at most
MAX_ASKED = 3000  # characters of a message typed outside Telegram shown in the chat
ASKED_ELSEWHERE = "🖥 You, in Rollback:"  # heads a message typed outside Telegram


class Sender:
    """The sender thread of a process and its state (turns, chats' next edit times)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.events: queue.Queue[Event | Unheard] = queue.Queue()
        self.replies: dict[int, Reply] = {}
        self.known: OrderedDict[int, bool] = OrderedDict()  # turn id -> relayed or not
        self.next_at: Pace = {}  # chat id -> when it may be edited again
        self.thread = threading.Thread(target=self.run, name=THREAD_NAME, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while True:
            try:
                event = self.events.get(timeout=self._wait())
            except queue.Empty:
                event = None
            try:
                if event is not None:
                    self._step(event)
                self._flush_due()
            except Exception:
                log.exception("telegram relay: a step failed")
            finally:
                if self.events.empty() and not self.replies:
                    connections.close_all()  # nothing to do: hold no database connection
                if event is not None:
                    self.events.task_done()

    def _wait(self) -> float | None:
        due = [self._due(r) for r in self.replies.values() if r.dirty or r.ending]
        if not due:
            return None if not self.replies else 5.0
        return max(0.0, min(due) - time.monotonic())

    def _due(self, reply: Reply) -> float:
        return self.next_at.get(reply.chat_id, 0.0)

    def _step(self, event: Event | Unheard) -> None:
        close_old_connections()
        if isinstance(event, Unheard):
            unheard = self._reply_of(event.turn_id)
            if unheard is not None and unheard.ending is None:
                unheard.ending = event.ending
            return
        turn_id: int = event["turn"]  # type: ignore[typeddict-item]
        reply = self._reply_of(turn_id, adopt=event["type"] == "turn.started")
        if reply is None:
            if event["type"] in ENDS:
                self.known.pop(turn_id, None)
            return
        note(reply, event)

    # the turns relayed -------------------------------------------------------------------------

    def _reply_of(self, turn_id: int, *, adopt: bool = False) -> Reply | None:
        """The state of the turn, when it is relayed (the row looked up once)."""
        reply = self.replies.get(turn_id)
        if reply is not None:
            return reply
        if self.known.get(turn_id) is False and not adopt:
            return None
        row = retrying(
            lambda: (
                TelegramReply.objects.filter(pk=turn_id, delivered_at__isnull=True)
                .values_list("chat_id", "message_ids", "turn__attempts")
                .first()
            )
        )
        if row is None and adopt:
            row = self._adopt(turn_id)
        self.known[turn_id] = row is not None
        while len(self.known) > KNOWN_TURNS:
            self.known.popitem(last=False)
        if row is None:
            return None
        chat_id, message_ids, attempts = row
        ids = [int(i) for i in message_ids] if isinstance(message_ids, list) else []
        reply = Reply(turn_id=turn_id, chat_id=int(chat_id), attempt=attempts or 1, message_ids=ids)
        self.replies[turn_id] = reply
        return reply

    def _adopt(self, turn_id: int) -> tuple[int, list[int], int] | None:
        """A turn started outside Telegram in the conversation of a chat linked to the session's
        owner: its TelegramReply is made (once: the turn is its key), and the chat is shown the
        message the turn answers before its reply. None for any other turn."""
        turn = retrying(
            lambda: (
                Turn.objects.select_related("session", "user_message").filter(pk=turn_id).first()
            )
        )
        chat_id = chat_of_key(turn.session.session_key) if turn is not None else None
        if turn is None or chat_id is None:
            return None
        linked = retrying(
            lambda: TelegramChat.objects.filter(
                chat_id=chat_id, user_id=turn.session.owner_id, user__is_active=True
            ).exists()
        )
        if not linked:
            return None
        row, made = retrying(
            lambda: TelegramReply.objects.get_or_create(turn=turn, defaults={"chat_id": chat_id})
        )
        if row.delivered_at is not None:
            return None
        if made:
            asked = turn.message.strip()
            if len(asked) > MAX_ASKED:
                asked = asked[: MAX_ASKED - 1] + "…"
            try:
                client.send_text(chat_id, f"{ASKED_ELSEWHERE}\n{asked}".rstrip())
            except client.TelegramError as exc:  # the reply is still relayed
                log.warning("telegram relay: turn %s: its message not shown: %s", turn_id, exc)
            self.next_at[chat_id] = time.monotonic() + edit_interval()
        ids = [int(i) for i in row.message_ids] if isinstance(row.message_ids, list) else []
        return chat_id, ids, turn.attempts

    # showing them ------------------------------------------------------------------------------

    def _flush_due(self) -> None:
        now = time.monotonic()
        for reply in list(self.replies.values()):
            if not (reply.dirty or reply.ending) or self._due(reply) > now:
                continue
            close_old_connections()
            try:
                if reply.ending:
                    deliver(reply, self.next_at)
                    self._forget(reply)
                elif not stream(reply, self.next_at):
                    self._forget(reply)
            except client.RateLimited as exc:
                self.next_at[reply.chat_id] = time.monotonic() + exc.retry_after
                if reply.ending:
                    reply.final_tries += 1
                    if reply.final_tries >= FINAL_TRIES:
                        log.warning(
                            "telegram relay: turn %s not delivered (rate limited)", reply.turn_id
                        )
                        self._forget(reply)
            except client.TelegramError as exc:
                log.warning("telegram relay: turn %s: %s", reply.turn_id, exc)
                self.next_at[reply.chat_id] = time.monotonic() + edit_interval()
                if reply.ending:
                    self._forget(reply)
                else:
                    reply.dirty = False  # the next piece tries again
            except Exception:
                # Anything else (the database away, a bug): this turn is dropped from the relay,
                # never retried in a loop; if its delivery was not claimed yet, the sweep
                # delivers it later.
                log.exception("telegram relay: turn %s failed", reply.turn_id)
                self._forget(reply)

    def _forget(self, reply: Reply) -> None:
        self.replies.pop(reply.turn_id, None)
        self.known.pop(reply.turn_id, None)
