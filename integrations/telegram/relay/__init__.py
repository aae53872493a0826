"""The relay: a turn's reply, streamed into the Telegram chat it came from.

Every process (web and Celery worker) listens to all the events it sends (`core.events.
listen_all`, registered in `integrations/apps.py`); the process that runs a turn sends its events,
so it is the one that relays it, whichever it is. The listener only queues the event: one sender
thread per process (`sender.py`) does the database reads and the Telegram calls, never the thread
that runs the turn. What a relayed turn's state is and what each event changes in it is
`state.py`'s; what its chat is shown, `show.py`'s.

Only turns with a TelegramReply row are relayed; the answer is looked up once per turn and kept
until the turn ends. The bridge makes the row with the turns it starts, in one transaction. A turn
started anywhere else (the web app, the API, `manage.py chat`) in a linked chat's conversation
gets its row when its `turn.started` is heard (`Sender._adopt`), and the chat is first shown the
message it answers: the chat and the session are one conversation, whichever side it is typed
on. For such a turn:
- while it streams (`message.delta`), the chat shows the reply so far as plain text, read from the
  turn attempt's stream (`sessions_app.reply_stream`, the authoritative snapshot, never the deltas
  added up): the first message is sent when text first appears, then edited at most once per
  TELEGRAM_EDIT_SECONDS (1 s) per chat, always with the latest text; past 4,096 UTF-16 units the
  text goes on in a new message. Each message id is kept in the row's `message_ids` as soon as it
  is sent, so a worker that takes over a turn goes on with the same messages. A tool's name shows
  under the text while it runs; a turn waiting for approval shows the call and its arguments, and
  how to answer (/approve, /refuse: integrations.telegram.commands).
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

import os
import threading
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from core import events
from core.events import Event
from integrations.models import TelegramReply
from integrations.telegram.relay.sender import ASKED_ELSEWHERE, Sender
from integrations.telegram.relay.state import RELAYED, Ending, Unheard, approval_note, edit_interval
from sessions_app.models import Turn

__all__ = [
    "ASKED_ELSEWHERE",
    "approval_note",
    "edit_interval",
    "idle",
    "on_event",
    "register",
    "replies_sweep",
]

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
        sender.events.put(Unheard(turn_id=turn_id, ending=_STATUS_ENDINGS[status]))
    return len(rows)


_sender: Sender | None = None
_sender_lock = threading.Lock()
_registered: list[object] = []


def _process_sender() -> Sender:
    global _sender
    with _sender_lock:
        if _sender is None or _sender.pid != os.getpid() or not _sender.thread.is_alive():
            _sender = Sender()  # a forked worker child starts its own thread
        return _sender


def on_event(event: Event) -> None:
    """The listener of every event of this process: quick, it only queues what may concern a
    Telegram chat (nothing at all while the bridge is off)."""
    if not settings.TELEGRAM_BOT_TOKEN or event["type"] not in RELAYED:
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
