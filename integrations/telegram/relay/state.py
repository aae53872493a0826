"""What the relay knows of a relayed turn (`Reply`), and what each event changes in it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from django.conf import settings
from django.db import OperationalError

from core.events import Event
from integrations.telegram.format import Piece

T = TypeVar("T")


def edit_interval() -> float:
    """Seconds between two edits of one chat: TELEGRAM_EDIT_SECONDS (Telegram allows about one
    a second; the tests shorten it)."""
    return float(settings.TELEGRAM_EDIT_SECONDS)


MAX_ARGS = 500  # characters of a tool call's arguments in the note that asks for approval
DB_TRIES = 6  # tries of a query while the database is busy

# The events the relay acts on, and those that end a turn.
RELAYED = frozenset(
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
ENDS = frozenset({"turn.finished", "turn.failed", "turn.cancelled"})

Ending = Literal["finished", "failed", "cancelled"]
ENDINGS: dict[str, Ending] = {
    "turn.finished": "finished",
    "turn.failed": "failed",
    "turn.cancelled": "cancelled",
}


@dataclass
class Reply:
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


@dataclass(frozen=True)
class Unheard:
    """A turn that ended with its reply undelivered and no relay to hear of it (replies_sweep)."""

    turn_id: int
    ending: Ending


def note(reply: Reply, event: Event) -> None:
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
    elif event["type"] in ENDS:
        reply.ending = ENDINGS[event["type"]]


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


def retrying(query: Callable[[], T]) -> T:
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
