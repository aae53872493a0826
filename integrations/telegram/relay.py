"""The relay: a turn's reply, streamed into the Telegram chat it came from.

Every process (web and Celery worker) listens to all the events it sends (`core.events.
listen_all`, registered in `integrations/apps.py`); the process that runs a turn sends its events,
so it is the one that relays it, whichever it is. The listener only queues the event: one sender
thread per process does the database reads and the Telegram calls, never the thread that runs
the turn.

Only turns with a TelegramReply row are relayed; the answer is looked up once per turn and kept
until the turn ends. The bridge makes the row with the turns it starts, in one transaction. A turn
started anywhere else (the web app, the API, `manage.py chat`) in a linked chat's conversation
gets its row when its `turn.started` is heard (`_adopt`), and the chat is first shown the message
it answers: the chat and the session are one conversation, whichever side it is typed on. For
such a turn:
- while it streams (`message.delta`), the chat shows the reply so far as plain text, read from the
  turn attempt's stream (`sessions_app.reply_stream`, the authoritative snapshot, never the deltas
  added up): the first message is sent when text first appears, then edited at most once per
  EDIT_INTERVAL per chat, always with the latest text; past 4,096 UTF-16 units the text goes on in
  a new message. Each message id is kept in the row's `message_ids` as soon as it is sent, so a
  worker that takes over a turn goes on with the same messages. A tool's name shows under the text
  while it runs; a turn waiting for approval shows the call and its arguments, and how to answer
  (/approve, /refuse: integrations.telegram.commands).
  A 429 postpones that chat's next edit by its `retry_after`;
- when it ends (`turn.finished`, `turn.failed`, `turn.cancelled`), the delivery is claimed by a
  conditional update of `delivered_at` (one process delivers), and the chat's messages show the
  final reply, read from the database and rendered with entities (format.render): the messages
  sent are edited in order, more are sent if needed, and any left over are deleted. A failed turn
  shows its error in a short note, a cancelled one its text so far and "stopped". A 429 delays the
  delivery by its `retry_after` (at most FINAL_TRIES times). A reply Telegram refuses otherwise
  (formatting it will not take, a message the reader deleted) is sent again as new messages of
  plain text.

A relay hears only the events of its own process. When the process running a turn dies after
the turn ended but before the delivery (or the events were lost otherwise), the periodic job
`integrations.deliver_replies` (beat, every minute: `replies_sweep`) delivers what is still
undelivered a minute after the turn ended. A delivery claimed and then refused by Telegram (after
its retries) is not tried again.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, TypeVar

from django.conf import settings
from django.db import OperationalError, close_old_connections, connections
from django.utils import timezone
from sessions_app.reply_stream import stream_snapshot

from core import events
from core.events import Event
from integrations.models import TelegramChat, TelegramReply
from integrations.telegram import client
from integrations.telegram.conversations import chat_of_key
from integrations.telegram.format import Piece, render, split_plain
from sessions_app.models import Turn

__all__ = ["EDIT_INTERVAL", "approval_note", "idle", "on_event", "register", "replies_sweep"]

log = logging.getLogger(__name__)

T = TypeVar("T")

EDIT_INTERVAL = 1.0  # seconds between two edits of one chat (Telegram allows about one a second)
FINAL_TRIES = 5  # 429s a final delivery waits out before it gives up
MAX_NOTE = 300  # characters of a failed turn's error in its note
MAX_ARGS = 500  # characters of a tool call's arguments in the note that asks for approval
DB_TRIES = 6  # tries of a query while the database is busy
KNOWN_TURNS = 2000  # turns whose answer (relayed or not) is kept in memory at most
MAX_ASKED = 3000  # characters of a message typed outside Telegram shown in the chat
ASKED_ELSEWHERE = "🖥 You, in Rollback:"  # heads a message typed outside Telegram

_RELAYED = frozenset(
    {
        "turn.started",
        "message.delta",
        "tool.started",
        "tool.finished",
        "tool.approval_requested",
        "tool.approval_answered",
        "turn.finished",
        "turn.failed",
        "turn.cancelled",
    }
)
_ENDS = frozenset({"turn.finished", "turn.failed", "turn.cancelled"})

Ending = Literal["finished", "failed", "cancelled"]
_ENDINGS: dict[str, Ending] = {
    "turn.finished": "finished",
    "turn.failed": "failed",
    "turn.cancelled": "cancelled",
}


@dataclass
class _Reply:
    """What the relay knows of one relayed turn's messages in its chat."""

    turn_id: int
    chat_id: int
    attempt: int
    message_ids: list[int]
    shown: dict[int, Piece] = field(default_factory=dict)  # message id -> what it shows
    dirty: bool = False  # the stream has more than the chat shows
    note: str = ""  # a line under the text (a tool running, an approval awaited)
    ending: Ending | None = None
    claimed: bool = False
    final_tries: int = 0


class _Sender:
    """The sender thread of a process and its state (turns, chats' next edit times)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.events: queue.Queue[Event | _Unheard] = queue.Queue()
        self.replies: dict[int, _Reply] = {}
        self.known: OrderedDict[int, bool] = OrderedDict()  # turn id -> relayed or not
        self.next_at: dict[int, float] = {}  # chat id -> when it may be edited again
        self.thread = threading.Thread(target=self.run, name="telegram-relay", daemon=True)
        self.thread.start()

    # the loop ---------------------------------------------------------------------------------

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

    def _due(self, reply: _Reply) -> float:
        return self.next_at.get(reply.chat_id, 0.0)

    def _step(self, event: Event | _Unheard) -> None:
        close_old_connections()
        if isinstance(event, _Unheard):
            unheard = self._reply_of(event.turn_id)
            if unheard is not None and unheard.ending is None:
                unheard.ending = event.ending
            return
        reply = self._reply(event)
        if reply is None:
            if event["type"] in _ENDS:
                self.known.pop(event["turn"], None)  # type: ignore[typeddict-item]
            return
        self._note(reply, event)

    def _note(self, reply: _Reply, event: Event) -> None:
        """What the event changes in the reply's state."""
        if event["type"] == "turn.started":
            if event["attempt"] > reply.attempt:
                reply.attempt = event["attempt"]  # taken over: a new stream
            reply.note = ""
        elif event["type"] == "message.delta":
            attempt = event.get("attempt")
            if attempt is not None and attempt < reply.attempt:
                return  # a stale attempt's piece
            if attempt is not None:
                reply.attempt = attempt
            reply.dirty = True
        elif event["type"] == "tool.started":
            reply.note = f"⚙️ {event['tool']}…"
            reply.dirty = True
        elif event["type"] == "tool.finished":
            reply.note = ""
            reply.dirty = True
        elif event["type"] == "tool.approval_requested":
            reply.note = approval_note(event["tool_name"], event.get("args"), event.get("note"))
            reply.dirty = True
        elif event["type"] == "tool.approval_answered":
            reply.note = ""
            reply.dirty = True
        elif event["type"] in _ENDS:
            reply.ending = _ENDINGS[event["type"]]

    def _reply(self, event: Event) -> _Reply | None:
        """The state of the event's turn, when it is relayed (the row looked up once)."""
        turn_id: int = event["turn"]  # type: ignore[typeddict-item]
        return self._reply_of(turn_id, adopt=event["type"] == "turn.started")

    def _reply_of(self, turn_id: int, *, adopt: bool = False) -> _Reply | None:
        reply = self.replies.get(turn_id)
        if reply is not None:
            return reply
        if self.known.get(turn_id) is False and not adopt:
            return None
        row = _retrying(
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
        reply = _Reply(
            turn_id=turn_id, chat_id=int(chat_id), attempt=attempts or 1, message_ids=ids
        )
        self.replies[turn_id] = reply
        return reply

    def _adopt(self, turn_id: int) -> tuple[int, list[int], int] | None:
        """A turn started outside Telegram in the conversation of a chat linked to the session's
        owner: its TelegramReply is made (once: the turn is its key), and the chat is shown the
        message the turn answers before its reply. None for any other turn."""
        turn = _retrying(
            lambda: (
                Turn.objects.select_related("session", "user_message").filter(pk=turn_id).first()
            )
        )
        chat_id = chat_of_key(turn.session.session_key) if turn is not None else None
        if turn is None or chat_id is None:
            return None
        linked = _retrying(
            lambda: TelegramChat.objects.filter(
                chat_id=chat_id, user_id=turn.session.owner_id, user__is_active=True
            ).exists()
        )
        if not linked:
            return None
        row, made = _retrying(
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
            self.next_at[chat_id] = time.monotonic() + EDIT_INTERVAL
        ids = [int(i) for i in row.message_ids] if isinstance(row.message_ids, list) else []
        return chat_id, ids, turn.attempts

    def _flush_due(self) -> None:
        now = time.monotonic()
        for reply in list(self.replies.values()):
            if not (reply.dirty or reply.ending) or self._due(reply) > now:
                continue
            close_old_connections()
            try:
                if reply.ending:
                    self._deliver(reply)
                else:
                    self._stream(reply)
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
                self.next_at[reply.chat_id] = time.monotonic() + EDIT_INTERVAL
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

    def _forget(self, reply: _Reply) -> None:
        self.replies.pop(reply.turn_id, None)
        self.known.pop(reply.turn_id, None)

    # streaming --------------------------------------------------------------------------------

    def _stream(self, reply: _Reply) -> None:
        """Show the reply so far (plain text), then no edit of the chat for EDIT_INTERVAL."""
        reply.dirty = False
        # Another process may have delivered the final reply meanwhile (a stop asked in the web
        # process ends the turn there): a late piece of the stream must not replace it.
        delivered = _retrying(
            lambda: TelegramReply.objects.filter(
                pk=reply.turn_id, delivered_at__isnull=False
            ).exists()
        )
        if delivered:
            self._forget(reply)
            return
        text = stream_snapshot(turn_id=reply.turn_id, attempt=reply.attempt).text
        if reply.note:
            text = f"{text.rstrip()}\n\n{reply.note}" if text.strip() else reply.note
        pieces = split_plain(text)
        if not pieces:
            return
        self._show(reply, pieces, final=False)

    def _show(self, reply: _Reply, pieces: list[Piece], *, final: bool) -> None:
        """The chat's messages of the reply show `pieces`: edits of those that differ, new
        messages for the rest (their ids kept in the row at once), and at the end, the surplus
        deleted. The chat waits EDIT_INTERVAL after any call."""
        called = False
        try:
            for i, piece in enumerate(pieces):
                if i < len(reply.message_ids):
                    message_id = reply.message_ids[i]
                    if reply.shown.get(message_id) == piece:
                        continue
                    called = True
                    client.edit_piece(reply.chat_id, message_id, piece, wait=False)
                    reply.shown[message_id] = piece
                else:
                    called = True
                    message_id = client.send_piece(reply.chat_id, piece, wait=False)
                    reply.message_ids.append(message_id)
                    reply.shown[message_id] = piece
                    self._keep_ids(reply, final=final)
            if final:
                surplus = reply.message_ids[len(pieces) :]
                for message_id in surplus:
                    called = True
                    client.delete_message(reply.chat_id, message_id)
                if surplus:
                    del reply.message_ids[len(pieces) :]
                    self._keep_ids(reply, final=final)
        finally:
            if called:
                self.next_at[reply.chat_id] = time.monotonic() + EDIT_INTERVAL

    def _keep_ids(self, reply: _Reply, *, final: bool) -> None:
        rows = TelegramReply.objects.filter(pk=reply.turn_id)
        if not final:
            rows = rows.filter(delivered_at__isnull=True)
        ids = list(reply.message_ids)
        _retrying(lambda: rows.update(message_ids=ids))

    # the end ----------------------------------------------------------------------------------

    def _deliver(self, reply: _Reply) -> None:
        """Claim the delivery (once, among all processes), then show the final reply."""
        if not reply.claimed:
            claimed = _retrying(
                lambda: TelegramReply.objects.filter(
                    pk=reply.turn_id, delivered_at__isnull=True
                ).update(delivered_at=timezone.now())
            )
            if claimed != 1:
                self._forget(reply)  # another process delivers it
                return
            reply.claimed = True
            stored = _retrying(
                lambda: (
                    TelegramReply.objects.filter(pk=reply.turn_id)
                    .values_list("message_ids", flat=True)
                    .first()
                )
            )
            if isinstance(stored, list) and len(stored) > len(reply.message_ids):
                reply.message_ids = [int(i) for i in stored]
        pieces = self._final_pieces(reply)
        try:
            self._show(reply, pieces, final=True)
        except client.RateLimited:
            raise
        except client.TelegramError as exc:
            log.warning(
                "telegram relay: turn %s: reply refused, sent again plain: %s", reply.turn_id, exc
            )
            self._resend_plain(reply, pieces)
        self._keep_ids(reply, final=True)
        self._forget(reply)

    def _resend_plain(self, reply: _Reply, pieces: list[Piece]) -> None:
        """Telegram refused the final reply (formatting it would not take, a message the reader
        deleted meanwhile): it is sent again as new messages of plain text, so it is not lost,
        and the messages shown before are deleted where they still can be."""
        before = list(reply.message_ids)
        reply.message_ids, reply.shown = [], {}
        self._show(reply, [Piece(p.text) for p in pieces], final=True)
        for message_id in before:
            try:
                client.delete_message(reply.chat_id, message_id)
            except client.TelegramError:
                log.info("telegram relay: turn %s: an earlier message stays", reply.turn_id)

    def _final_pieces(self, reply: _Reply) -> list[Piece]:
        turn = _retrying(
            lambda: Turn.objects.select_related("reply_message").filter(pk=reply.turn_id).first()
        )
        text = turn.reply if turn is not None else ""
        if reply.ending == "failed":
            error = (turn.error if turn is not None else "") or "unknown error"
            if len(error) > MAX_NOTE:
                error = error[: MAX_NOTE - 1] + "…"
            return split_plain(f"⚠️ The reply failed: {error}")
        if reply.ending == "cancelled":
            return render(f"{text.rstrip()}\n\n*(stopped)*" if text.strip() else "*(stopped)*")
        return render(text)


def approval_note(tool: str, args: object, may_have_run: str | None = None) -> str:
    """What the chat is shown under the reply while a tool call waits for the owner's answer:
    the call, with its arguments (at most MAX_ARGS characters), what is known of it (it may
    have run already, in an attempt whose worker stopped), and how to answer."""
    shown = json.dumps(args, ensure_ascii=False, sort_keys=True) if args not in (None, {}) else ""
    if len(shown) > MAX_ARGS:
        shown = shown[: MAX_ARGS - 1] + "…"
    call = f"{tool} {shown}".rstrip()
    warning = f"\n⚠️ {may_have_run}" if may_have_run else ""
    return f"⏸ The agent waits for your approval to run {call}{warning}\nSend /approve or /refuse."


@dataclass(frozen=True)
class _Unheard:
    """A turn that ended with its reply undelivered and no relay to hear of it (replies_sweep)."""

    turn_id: int
    ending: Ending


_STATUS_ENDINGS: dict[str, Ending] = {
    Turn.Status.DONE: "finished",
    Turn.Status.FAILED: "failed",
    Turn.Status.CANCELLED: "cancelled",
}
SWEEP_AFTER = timedelta(seconds=60)  # a relay delivers well before; past this, nobody will
SWEEP_BATCH = 100


def replies_sweep(*, ended_before: datetime | None = None) -> int:
    """Deliver the replies that no relay will: turns ended (before `ended_before`, by default a
    minute ago) whose TelegramReply is still undelivered, because the process that ran them died
    between the end and the delivery, or lost the events. Handed to this process's sender, which
    claims each delivery by `delivered_at` as always, so a relay that is late after all and this
    never both deliver. The periodic job (integrations.deliver_replies) calls it. Returns how many
    were handed over."""
    if not settings.TELEGRAM_BOT_TOKEN:
        return 0
    cutoff = ended_before or timezone.now() - SWEEP_AFTER
    rows = list(
        TelegramReply.objects.filter(
            delivered_at__isnull=True,
            turn__status__in=list(_STATUS_ENDINGS),
            turn__finished_at__lt=cutoff,
        )
        .order_by("turn_id")
        .values_list("turn_id", "turn__status")[:SWEEP_BATCH]
    )
    sender = _process_sender()
    for turn_id, status in rows:
        sender.events.put(_Unheard(turn_id=turn_id, ending=_STATUS_ENDINGS[status]))
    return len(rows)


def _retrying(query: Callable[[], T]) -> T:
    """Run a short query, again after a moment if the database is busy (SQLite: another
    thread's write holds the lock), at most DB_TRIES times."""
    for attempt in range(1, DB_TRIES + 1):
        try:
            return query()
        except OperationalError:
            if attempt == DB_TRIES:
                raise
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")


_sender: _Sender | None = None
_sender_lock = threading.Lock()
_registered: list[object] = []


def _process_sender() -> _Sender:
    global _sender
    with _sender_lock:
        if _sender is None or _sender.pid != os.getpid() or not _sender.thread.is_alive():
            _sender = _Sender()  # a forked worker child starts its own thread
        return _sender


def on_event(event: Event) -> None:
    """The listener of every event of this process: quick, it only queues what may concern a
    Telegram chat (nothing at all while the bridge is off)."""
    if not settings.TELEGRAM_BOT_TOKEN or event["type"] not in _RELAYED:
        return
    _process_sender().events.put(event)


def register() -> None:
    """Listen to this process's events (once; integrations/apps.py's ready())."""
    with _sender_lock:
        if not _registered:
            _registered.append(events.listen_all(on_event))


def idle(timeout: float = 10.0) -> bool:
    """Wait until this process's relay has nothing left to do (no event queued, no reply in
    flight); True if it came to that in time. For tests and shutdowns."""
    sender = _sender
    if sender is None or sender.pid != os.getpid():
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sender.events.unfinished_tasks == 0 and not sender.replies:
            return True
        time.sleep(0.02)
    return False
