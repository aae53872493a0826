"""What a relayed turn's chat is shown: the reply so far while it streams, the final reply at
its end (integrations.telegram.relay's docstring says how). `pace` holds each chat's earliest
next edit (time.monotonic); every call to Telegram here pushes it TELEGRAM_EDIT_SECONDS on."""

from __future__ import annotations

import logging
import time

from django.utils import timezone

from integrations.models import TelegramReply
from integrations.telegram import client
from integrations.telegram.format import Piece, render, split_plain
from integrations.telegram.relay.state import Reply, edit_interval, retrying
from sessions_app.models import Turn
from sessions_app.reply_stream import stream_snapshot

log = logging.getLogger("integrations.telegram.relay")

MAX_NOTE = 300  # characters of a failed turn's error in its note

Pace = dict[int, float]  # chat id -> when it may be edited again


def stream(reply: Reply, pace: Pace) -> bool:
    """Show the reply so far (plain text), then no edit of the chat for TELEGRAM_EDIT_SECONDS. False
    when the reply is no longer this relay's to show."""
    reply.dirty = False
    # Another process may have delivered the final reply meanwhile (a stop asked in the web
    # process ends the turn there): a late piece of the stream must not replace it.
    delivered = retrying(
        lambda: TelegramReply.objects.filter(pk=reply.turn_id, delivered_at__isnull=False).exists()
    )
    if delivered:
        return False
    text = stream_snapshot(turn_id=reply.turn_id, attempt=reply.attempt).text
    if reply.note:
        text = f"{text.rstrip()}\n\n{reply.note}" if text.strip() else reply.note
    pieces = split_plain(text)
    if pieces:
        show(reply, pieces, final=False, pace=pace)
    return True


def show(reply: Reply, pieces: list[Piece], *, final: bool, pace: Pace) -> None:
    """The chat's messages of the reply show `pieces`: edits of those that differ, new
    messages for the rest (their ids kept in the row at once), and at the end, the surplus
    deleted. The chat waits TELEGRAM_EDIT_SECONDS after any call."""
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
                keep_ids(reply, final=final)
        if final:
            surplus = reply.message_ids[len(pieces) :]
            for message_id in surplus:
                called = True
                client.delete_message(reply.chat_id, message_id)
            if surplus:
                del reply.message_ids[len(pieces) :]
                keep_ids(reply, final=final)
    finally:
        if called:
            pace[reply.chat_id] = time.monotonic() + edit_interval()


def keep_ids(reply: Reply, *, final: bool) -> None:
    rows = TelegramReply.objects.filter(pk=reply.turn_id)
    if not final:
        rows = rows.filter(delivered_at__isnull=True)
    ids = list(reply.message_ids)
    retrying(lambda: rows.update(message_ids=ids))


def deliver(reply: Reply, pace: Pace) -> None:
    """Claim the delivery (once, among all processes), then show the final reply. Either way
    the reply is done with after it, unless Telegram asks to wait (client.RateLimited)."""
    if not reply.claimed:
        claimed = retrying(
            lambda: TelegramReply.objects.filter(
                pk=reply.turn_id, delivered_at__isnull=True
            ).update(delivered_at=timezone.now())
        )
        if claimed != 1:
            return  # another process delivers it
        reply.claimed = True
        stored = retrying(
            lambda: (
                TelegramReply.objects.filter(pk=reply.turn_id)
                .values_list("message_ids", flat=True)
                .first()
            )
        )
        if isinstance(stored, list) and len(stored) > len(reply.message_ids):
            reply.message_ids = [int(i) for i in stored]
    pieces = final_pieces(reply)
    try:
        show(reply, pieces, final=True, pace=pace)
    except client.RateLimited:
        raise
    except client.TelegramError as exc:
        log.warning(
            "telegram relay: turn %s: reply refused, sent again plain: %s", reply.turn_id, exc
        )
        resend_plain(reply, pieces, pace)
    keep_ids(reply, final=True)


def resend_plain(reply: Reply, pieces: list[Piece], pace: Pace) -> None:
    """Telegram refused the final reply (formatting it would not take, a message the reader
    deleted meanwhile): it is sent again as new messages of plain text, so it is not lost,
    and the messages shown before are deleted where they still can be."""
    before = list(reply.message_ids)
    reply.message_ids, reply.shown = [], {}
    show(reply, [Piece(p.text) for p in pieces], final=True, pace=pace)
    for message_id in before:
        try:
            client.delete_message(reply.chat_id, message_id)
        except client.TelegramError:
            log.info("telegram relay: turn %s: an earlier message stays", reply.turn_id)


def final_pieces(reply: Reply) -> list[Piece]:
    turn = retrying(
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
