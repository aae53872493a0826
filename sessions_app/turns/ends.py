"""How a turn ends: done (`turn_finish`), failed (`turn_fail`) or cancelled (`turn_cancel`;
what it did before it stopped is kept by sessions_app.turns.stopped.turn_keep_stopped)."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core import events
from core.errors import InvalidInput
from core.model_choice import DEMO_MODEL_ID, chosen_model, is_demo
from core.validation import JSONObject, storable_json, storable_text
from sessions_app.errors import TurnAlreadyEnded

from ..models import Turn
from ..reply_stream import stream_snapshot
from .attempts import end_dropping_writes, end_keeping_writes, owned
from .paused import paused_new_messages, without_pause
from .start import turn_model_of
from .stopped import turn_keep_stopped
from .texts import bounded


def turn_finish(
    *,
    turn: Turn,
    reply: str,
    tools_used: list[str],
    checkpoint_id: int | None = None,
    rolled_back_to_id: int | None = None,
    metadata: JSONObject | None = None,
) -> bool:
    """Mark the caller's running attempt of the turn done. False when the turn is no longer the
    caller's (taken over, or failed meanwhile): then nothing changes."""
    text = bounded(storable_text(reply), settings.AGENT_MAX_REPLY_CHARS)
    meta = without_pause({**turn.metadata, **(metadata or {})})
    stored = turn.reply_message  # set by turn_store_messages: its last assistant message
    if text and (stored is None or stored.content != text):
        # No stored message holds this reply (the run's last message was not the assistant's,
        # or its text differs): then, and only then, the turn keeps the text itself.
        meta["reply_text"] = text
    values = {
        "tools_used": storable_json(tools_used),
        "finished_at": timezone.now(),
        "metadata": storable_json(meta),
    }
    done = owned(turn).update(
        status=Turn.Status.DONE,
        checkpoint_id=checkpoint_id,
        rolled_back_to_id=rolled_back_to_id,
        reply_message=stored,
        **values,
    )
    if done:  # otherwise `turn` keeps the caller's attempt: it is the caller's token
        # What the update wrote, without reading the row back.
        turn.status = Turn.Status.DONE
        turn.tools_used = values["tools_used"]
        turn.checkpoint_id = checkpoint_id
        turn.rolled_back_to_id = rolled_back_to_id
        turn.finished_at = values["finished_at"]
        turn.metadata = values["metadata"]
        events.turn_finished(
            session=turn.session_id,
            turn=turn.pk,
            reply=text,
            tools_used=list(turn.tools_used),
            checkpoint=turn.checkpoint_id,
            rolled_back_to=turn.rolled_back_to_id,
            finish_reason=turn.finish_reason,
        )
    return done == 1


def turn_fail(*, turn: Turn, error: str, metadata: JSONObject | None = None) -> bool:
    """Fail the turn with a readable error, if it is still queued or running in the attempt the
    caller holds (`turn.attempts`). What was stored stays stored (the user's message); what the
    turn's agent wrote to the workspace goes, like its tool messages. False when nothing
    changed."""
    failed = end_dropping_writes(
        turn.pk,
        turn.session_id,
        Turn.objects.filter(pk=turn.pk, status__in=Turn.ACTIVE, attempts=turn.attempts),
        status=Turn.Status.FAILED,
        error=storable_text(error)[:4000],
        finished_at=timezone.now(),
        pending_approval=None,
        metadata=storable_json(without_pause({**turn.metadata, **(metadata or {})})),
    )
    if failed:
        turn.refresh_from_db()
        events.turn_failed(session=turn.session_id, turn=turn.pk, error=turn.error)
    return failed == 1


def turn_cancel(*, turn: Turn) -> Turn:
    """Stop a queued or running turn: it ends `cancelled` (finish_reason "cancelled") and
    `turn.cancelled` is sent once, after commit. A queued turn is never claimed afterwards; the
    worker running it notices within about TURN_STOP_POLL_SECONDS, closes the model's stream and
    keeps what was streamed so far (`turn_keep_stopped`). Cancelling a cancelled turn changes
    nothing; a turn that already finished or failed raises TurnAlreadyEnded. One conditional
    update decides a race with the turn's natural end: exactly one of them wins. The reply
    streamed so far (what every open page shows) is kept at once, in the same transaction, as
    the stopped reply (`_keep_shown`), so `turn.cancelled` finds the message in its final form;
    the worker, once it notices, adds its metadata and the messages of its calls before it
    (sessions_app.turns.stopped). What the turn's agent wrote to the workspace stays: a write
    that ran is the turn's, and its tool message is kept. A turn paused for an approval ends its
    wait too (`tool.approval_answered`, reason "cancelled"): the call never runs."""
    with transaction.atomic():
        before = Turn.objects.filter(pk=turn.pk).values_list("status", "pending_approval").first()
        status, waiting = before if before is not None else ("", None)
        # No worker holds it: paused for an answer, or answered and queued for its continuation.
        paused = status in (Turn.Status.AWAITING_APPROVAL, Turn.Status.QUEUED)
        cancelled = end_keeping_writes(
            turn.pk,
            turn.session_id,
            Turn.objects.filter(pk=turn.pk, status__in=Turn.ACTIVE),
            status=Turn.Status.CANCELLED,
            finished_at=timezone.now(),
            pending_approval=None,
        )
        if cancelled:
            _keep_shown(turn.pk, paused=paused)
            events.turn_cancelled(session=turn.session_id, turn=turn.pk)
            if (
                status == Turn.Status.AWAITING_APPROVAL
                and isinstance(waiting, dict)
                and isinstance(waiting.get("tool_call_id"), str)
            ):
                events.tool_approval_answered(
                    session=turn.session_id,
                    turn=turn.pk,
                    tool_call_id=waiting["tool_call_id"],
                    approved=False,
                    reason="cancelled",
                )
    turn.refresh_from_db()
    if turn.status != Turn.Status.CANCELLED:
        raise TurnAlreadyEnded()
    return turn


def _keep_shown(turn_id: int, *, paused: bool) -> None:
    """Keep what a just-cancelled turn streamed so far (read from its stream: what the pages
    show) as its stopped reply, empty when nothing was (never claimed, or stopped before the
    reply): the page then says "Stopped before the reply" and offers Regenerate. Inside
    turn_cancel's transaction, under the session's lock."""
    turn = Turn.objects.select_related("session").filter(pk=turn_id).first()
    if turn is None:
        return
    # A turn stopped while paused for an approval (or queued for its continuation) has no
    # worker to notice: what it did before the pause is kept from its saved state, the call
    # that waited as one that did not run.
    ran = paused_new_messages(turn) if paused else []
    shown = ""
    if not ran and turn.attempts:
        shown = stream_snapshot(turn_id=turn.pk, attempt=turn.attempts).text
    metadata: JSONObject = {"model": _model_label(turn)}
    if is_demo():
        metadata["demo"] = True
    turn_keep_stopped(turn=turn, reply=shown, messages=ran, metadata=metadata)


def _model_label(turn: Turn) -> str:
    """The model a turn's session asks for, as the worker labels it (agents.model.model_label)."""
    if is_demo():
        return DEMO_MODEL_ID
    session_settings = turn.session.settings if turn.session_id else {}
    asked = turn_model_of(turn)  # a reply regenerated with another model
    if asked:
        session_settings = {**session_settings, "model": asked}
    try:
        return chosen_model(session_settings) or settings.AGENT_MODEL
    except InvalidInput:
        return str(settings.AGENT_MODEL)
