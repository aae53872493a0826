"""Turns: one user message and the agent's answer to it.

`turn_start` stores the user's message before the model is ever called, so a failed turn loses
nothing the user wrote. The agent's messages are stored together when the run ends
(`turn_store_messages`); a run that fails stores none of them (`turn_fail`).

A worker claims a queued turn (`turn_claim`), which counts an attempt; the attempt number is its
fencing token: heartbeats, storing the answer and finishing all check it, so a worker that was
given up on can never store an answer after the turn was handed to another one
(`turn_recover_stale`). One reply is stored, once.

What the turn's agent wrote to the workspace goes with its tool messages: kept when the turn ends
`done`, deleted (captures.turn_writes_drop, with the checkpoints and branches that captured
them) in the same transaction when it fails, is stopped, or is claimed again to run from its
start. Those changes take the session's lock first, like every
writer of a session's rows, so an agent's write in flight is either dropped or refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from core import events, logs
from core.errors import InvalidInput
from core.model_choice import DEMO_MODEL_ID, chosen_model, is_demo
from core.validation import JSONObject, storable_json, storable_text
from sessions_app.errors import (
    BranchNotFound,
    MessageTooLong,
    SessionNotFound,
    TurnAlreadyEnded,
    TurnInProgress,
)

from .approvals import with_may_have_run
from .captures import turn_writes_drop
from .models import Branch, Effect, Message, Session, Turn
from .reply_stream import stream_reset, stream_snapshot
from .selectors import branch_history
from .services import lock_session, message_append, message_append_locked, session_update

if TYPE_CHECKING:
    from .models import Checkpoint


# Ends a text the agent produced that was cut off at its length limit (AGENT_MAX_REPLY_CHARS, or
# the model's own max_tokens): a reply, a tool's result, a tool call's arguments.
CUT_NOTE = "\n\n[cut off here: it reached the length limit]"


def cut_off(text: str, limit: int) -> str:
    """At most `limit` characters of `text`, marked as cut off."""
    return text[:limit] + CUT_NOTE


def bounded(text: str, limit: int) -> str:
    """`text`, cut off at `limit` characters when it is longer (a text already cut off, ending
    with the note, stays as it is)."""
    if len(text) <= limit or (text.endswith(CUT_NOTE) and len(text) <= limit + len(CUT_NOTE)):
        return text
    return cut_off(text, limit)


def _bounded_json(value: Any, limit: int) -> Any:
    """A JSON value (a tool call's arguments) whose text is longer than `limit` characters is
    replaced by {"cut_off": the start of that text}."""
    if value is None:
        return None
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= limit else {"cut_off": cut_off(text, limit)}


def _bounded_calls(calls: Any, limit: int) -> Any:
    """An assistant message's tool calls, each one's arguments (JSON text) bounded."""
    if not isinstance(calls, list):
        return _bounded_json(calls, limit)
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            arguments = function.get("arguments")
            if isinstance(arguments, str) and len(arguments) > limit:
                call = {**call, "function": {**function, "arguments": cut_off(arguments, limit)}}
        out.append(call)
    return out


def message_limits_check(
    *, what: str, role: str, content: str, tool_result: str, tool_args: Any, tool_calls: Any
) -> None:
    """A message brought in whole (an imported one) within the limits of the messages typed and
    generated here: a user's text at most AGENT_MAX_INPUT_CHARS characters (`clean_user_message`);
    the agent's texts, tool results and tool-call arguments as `turn_store_answer` bounds them,
    at most AGENT_MAX_REPLY_CHARS (and the note saying a text was cut off there). MessageTooLong
    (413) names the message (`what`) and the part."""
    limit = settings.AGENT_MAX_REPLY_CHARS
    if role == Message.Role.USER:
        typed = settings.AGENT_MAX_INPUT_CHARS
        if len(content) > typed:
            raise MessageTooLong(
                f"The content of {what} is {len(content)} characters long; the limit for a "
                f"user's message is {typed}."
            )
    elif bounded(content, limit) != content:
        raise MessageTooLong(
            f"The content of {what} is {len(content)} characters long; the limit is {limit}."
        )
    if bounded(tool_result, limit) != tool_result:
        raise MessageTooLong(
            f"The tool_result of {what} is {len(tool_result)} characters long; "
            f"the limit is {limit}."
        )
    cut = tool_args.get("cut_off") if isinstance(tool_args, dict) and len(tool_args) == 1 else None
    if _bounded_json(tool_args, limit) != tool_args and not (
        isinstance(cut, str) and bounded(cut, limit) == cut
    ):
        raise MessageTooLong(f"The tool_args of {what} are longer than {limit} characters as JSON.")
    if _bounded_calls(tool_calls, limit) != tool_calls:
        raise MessageTooLong(
            f"A tool call's arguments in {what} are longer than {limit} characters."
        )


def clean_user_message(message: object) -> str:
    if not isinstance(message, str):
        raise InvalidInput("The message must be text.")
    text: str = storable_text(message)
    if not text.strip():
        raise InvalidInput("The message is empty.")
    limit = settings.AGENT_MAX_INPUT_CHARS
    if len(text) > limit:
        raise MessageTooLong(f"The message is {len(text)} characters long; the limit is {limit}.")
    return text


def _origin() -> dict[str, Any]:
    """The id of the request queuing a turn, kept on it: the worker's log lines for the turn
    carry it (Turn.log_ids)."""
    request_id = logs.current().get("request_id")
    return {"request_id": request_id} if request_id else {}


def turn_start(
    *,
    session: Session,
    message: Any,
    branch: Branch | None = None,
    idempotency_key: str = "",
    request_fingerprint: str = "",
) -> Turn:
    """Queue a turn on the session's current branch (or on `branch`) and store the user's
    message. Empty or oversized messages are refused before anything is written. With an
    idempotency key, `request_fingerprint` (a digest of the request that carried it) is kept
    with the turn, so a later request with the same key can be told apart (agents.services).
    A message sent in an archived session brings it back (announced like any unarchiving)."""
    text = clean_user_message(message)
    try:
        with transaction.atomic():
            locked_session = lock_session(session.pk)
            if Turn.objects.filter(session=session).active().exists():
                raise TurnInProgress()
            if locked_session.archived_at is not None:
                session_update(session=locked_session, archived=False)
                session.archived_at = None
            if branch is not None and branch.session_id != session.pk:
                raise BranchNotFound()
            # Read under the session's lock, which every writer of a branch takes first: its
            # message_count is the one to append at.
            rows = Branch.objects.select_for_update()
            try:
                locked = (
                    rows.get(session=session, is_current=True)
                    if branch is None
                    else rows.get(pk=branch.pk)
                )
            except Branch.DoesNotExist:
                raise BranchNotFound() from None
            branch = branch or locked
            stored = message_append_locked(
                branch=branch, locked=locked, role=Message.Role.USER, content=text
            )
            return Turn.objects.create(
                session=session,
                branch=branch,
                user_message=stored,
                user_message_position=stored.position,
                metadata={
                    "user_message_id": stored.pk,
                    **_origin(),
                    **({"request_fingerprint": request_fingerprint} if idempotency_key else {}),
                },
                idempotency_key=idempotency_key,
            )
    except IntegrityError:
        # Two requests raced past the check; the partial unique index stopped the second.
        raise TurnInProgress() from None


# A reply ended before the model finished it (a length limit, or a stream that ended early):
# it can be continued.
CUT_OFF_REASONS = ("length", "interrupted")


def is_cut_off(message: Message) -> bool:
    """An assistant reply that ended before the model finished it: shown as cut off, and, as
    its branch's last message, continued in place (`turn_continue`)."""
    metadata = message.metadata if isinstance(message.metadata, dict) else {}
    return (
        message.role == Message.Role.ASSISTANT
        and not message.tool_calls
        and metadata.get("finish_reason") in CUT_OFF_REASONS
    )


def without_cut_note(text: str) -> str:
    """A cut-off reply's text without the note that marks it cut off (CUT_NOTE)."""
    return text.removesuffix(CUT_NOTE)


def turn_continue(*, session: Session, reply_id: int) -> Turn:
    """Queue a turn that extends the cut-off reply `reply_id`, the last message of the
    session's current branch, in place: no user message is stored. The turn refers to the
    reply's position (`user_message_position`, so its answer is appended right after it) and
    names it in `metadata.continues`; the agent sends the history up to and with that reply,
    then asks the model to go on exactly where it stopped, and stores the new text as an
    assistant message marked {"continues": reply_id}, which the pages and the model's history
    join to the reply it extends. InvalidInput when the message is not the branch's last
    reply, or not cut off."""
    try:
        with transaction.atomic():
            lock_session(session.pk)
            if Turn.objects.filter(session=session).active().exists():
                raise TurnInProgress()
            try:
                branch = Branch.objects.select_for_update().get(session=session, is_current=True)
            except Branch.DoesNotExist:
                raise BranchNotFound() from None
            end = branch.message_count
            last = branch_history(branch, start=end - 1, end=end) if end else []
            reply = last[0] if last else None
            if reply is None or reply.pk != reply_id or not is_cut_off(reply):
                raise InvalidInput(
                    "Only the last reply of the conversation, when it was cut off, can be "
                    "continued."
                )
            return Turn.objects.create(
                session=session,
                branch=branch,
                user_message=None,
                user_message_position=reply.position,
                metadata={"continues": reply.pk, **_origin()},
            )
    except IntegrityError:
        raise TurnInProgress() from None


def continued_reply(turn: Turn) -> int | None:
    """The id of the cut-off reply a turn continues, or None for a turn that answers a user
    message."""
    meta = turn.metadata if isinstance(turn.metadata, dict) else {}
    value = meta.get("continues")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def turn_retry(*, turn: Turn) -> Turn:
    """Try a failed turn again. When its message is still the last of its branch, a new turn
    answers that same message (it is not stored twice); otherwise the message is sent again on
    the current branch."""
    if turn.status != Turn.Status.FAILED:
        raise InvalidInput("Only a failed turn can be retried.")
    continues = continued_reply(turn)
    if continues is not None:  # continuing a cut-off reply: continue it again
        return turn_continue(session=turn.session, reply_id=continues)
    with transaction.atomic():
        lock_session(turn.session_id)
        if Turn.objects.filter(session_id=turn.session_id).active().exists():
            raise TurnInProgress()
        branch = (
            Branch.objects.filter(pk=turn.branch_id, is_current=True).first()
            if turn.branch_id is not None
            else None
        )
        position = turn.user_message_position
        if branch is None or position is None or branch.message_count != position + 1:
            return turn_start(session=turn.session, message=turn.message)
        return Turn.objects.create(
            session_id=turn.session_id,
            branch=branch,
            user_message_id=turn.user_message_id,
            user_message_position=position,
            metadata={"retry_of": turn.pk, **_origin()},
        )


def turn_claim(*, turn_id: int, worker: str = "") -> Turn | None:
    """Move a queued turn to running and return it, its `attempts` counting this claim (the
    claimer's fencing token) and `metadata.worker` naming the claimer (host:pid). None when it is
    not queued: a redelivered task, a turn another worker took, a finished turn, a deleted
    session. A turn claimed before (taken over from a worker that died) runs again from its
    start: what its earlier attempts wrote to the workspace is deleted in the same transaction."""
    now = timezone.now()
    session_id: int | None = None
    while True:
        with transaction.atomic():
            if session_id is not None:
                try:
                    lock_session(session_id)
                except SessionNotFound:
                    return None
            turn = (
                Turn.objects.select_for_update(of=("self",))
                .select_related("session", "session__owner", "user_message")
                .filter(pk=turn_id, status=Turn.Status.QUEUED)
                .first()
            )
            if turn is None:
                return None
            if turn.attempts and session_id is None:
                # Dropping the earlier writes needs the session's lock, which every writer
                # takes before a turn's row: claim again, taking it first (rare: a take-over).
                session_id = turn.session_id
                continue
            turn.status = Turn.Status.RUNNING
            turn.attempts += 1
            turn.started_at = turn.heartbeat_at = now
            if worker:
                turn.metadata = {**turn.metadata, "worker": worker}
            turn.save(
                update_fields=["status", "attempts", "started_at", "heartbeat_at", "metadata"]
            )
            if turn.attempts > 1:
                turn_writes_drop(turn.pk)
            events.turn_started(
                session=turn.session_id, turn=turn.pk, branch=turn.branch_id, attempt=turn.attempts
            )
        # Outside the transaction (no lock held while the store answers), before any piece.
        stream_reset(turn_id=turn.pk, attempt=turn.attempts)
        return turn


def _end_dropping_writes(
    turn_id: int, session_id: int, rows: QuerySet[Turn], **values: Any
) -> bool:
    """End a turn other than `done` (failed, cancelled) by the conditional update
    `rows.update(**values)`, under the session's lock, and delete its workspace writes in the
    same transaction (its tool messages are not kept either). False when the update matched
    nothing, or the session is gone."""
    with transaction.atomic():
        try:
            lock_session(session_id)
        except SessionNotFound:
            return False
        if not rows.update(**values):
            return False
        turn_writes_drop(turn_id)
    return True


# A worker's turn is running, or paused while a tool call waits for its owner's approval
# (sessions_app.approvals): either way the worker holds it and beats.
HELD = (Turn.Status.RUNNING, Turn.Status.AWAITING_APPROVAL)


def _owned(turn: Turn) -> QuerySet[Turn]:
    """The turn's row while the caller still holds the attempt it claimed."""
    return Turn.objects.filter(pk=turn.pk, status__in=HELD, attempts=turn.attempts)


def turn_heartbeat(*, turn: Turn) -> bool:
    """Say the worker of this attempt is alive. False when the turn is no longer its own (taken
    over, finished, failed or deleted): the worker should stop."""
    return _owned(turn).update(heartbeat_at=timezone.now()) == 1


WORKER_DIED = (
    "The worker answering this turn stopped ({attempts}, each time no sign of life for "
    "{seconds} s). Your message is kept; send it again."
)
NOT_PICKED_UP = (
    "No worker picked this turn up within {seconds} s (is a Celery worker running?). "
    "Your message is kept; send it again."
)


@dataclass
class Recovery:
    """What `turn_recover_stale` did: turns queued again for another worker, turns failed, and
    queued turns to send to the workers again (their task is lost, or late)."""

    requeued: list[Turn] = field(default_factory=list)
    failed: list[Turn] = field(default_factory=list)
    redispatched: list[Turn] = field(default_factory=list)


def _silent_since(cutoff: datetime) -> Q:
    return Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)


def turn_recover_stale(*, session_id: int | None = None) -> Recovery:
    """Turns whose worker died go back to the queue, to be run again from their user message
    (a turn that used up AGENT_TURN_ATTEMPTS is failed instead); turns no worker picked up in
    TURN_QUEUE_TIMEOUT are failed; queued turns no worker claimed in TURN_REDISPATCH_SECONDS
    since they were last sent are to be sent again (`redispatched`: the caller sends them; their
    task may be lost, and if it was only late the claim lets one of the two run). The candidates
    are found by one query (nothing more when there are none, as on almost every call); each
    change is one conditional update, so a heartbeat or a claim that arrives meanwhile, or
    another recovery running at the same time, wins cleanly."""
    now = timezone.now()
    stale = settings.AGENT_TURN_STALE_SECONDS
    cutoff = now - timedelta(seconds=stale)
    qcut = now - timedelta(seconds=settings.TURN_QUEUE_TIMEOUT)
    rcut = now - timedelta(seconds=settings.TURN_REDISPATCH_SECONDS)
    turns = Turn.objects.all() if session_id is None else Turn.objects.filter(session_id=session_id)
    dead = Q(_silent_since(cutoff), status__in=HELD)
    lost = Q(_unclaimed_since(qcut), status=Turn.Status.QUEUED)
    unsent = Q(status=Turn.Status.QUEUED, dispatched_at__lt=rcut)
    candidates = list(
        turns.filter(dead | lost | unsent)
        .only(
            "id",
            "session_id",
            "status",
            "attempts",
            "metadata",
            "heartbeat_at",
            "started_at",
            "created_at",
            "dispatched_at",
        )
        .order_by("pk")
    )
    done = Recovery()
    for turn in candidates:
        if turn.status in HELD:
            _recover_dead(turn, cutoff, now, done)
    for turn in candidates:
        if turn.status == Turn.Status.QUEUED and _is_unclaimed_since(turn, qcut):
            _fail_lost(turn, qcut, now, done)
    failed = {turn.pk for turn in done.failed}
    for turn in candidates:
        late = turn.status == Turn.Status.QUEUED and turn.dispatched_at < rcut
        if late and turn.pk not in failed:
            _redispatch(turn, now, done)
    return done


def _unclaimed_since(cutoff: datetime) -> Q:
    return Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created_at__lt=cutoff)


def _is_unclaimed_since(turn: Turn, cutoff: datetime) -> bool:
    if turn.heartbeat_at is not None:
        return turn.heartbeat_at < cutoff
    return turn.created_at < cutoff


def _recover_dead(turn: Turn, cutoff: datetime, now: datetime, done: Recovery) -> None:
    """Queue again (or fail, out of attempts) a running turn whose worker fell silent, or a
    paused one (awaiting approval) whose worker did: the next worker runs it again from its user
    message and asks again for the calls that need approval (no answer of the dead attempt
    counts for the next; those it approved are recorded as calls that may have run)."""
    still_dead = Turn.objects.filter(
        _silent_since(cutoff), pk=turn.pk, status__in=HELD, attempts=turn.attempts
    )
    # The calls the dead attempt had approved may have run before it died: on record for good,
    # and the next attempt's card for the same call says so (sessions_app.approvals).
    recorded = with_may_have_run(turn.metadata, turn.attempts)
    if turn.attempts < settings.AGENT_TURN_ATTEMPTS:
        taken = {**recorded, "taken_over": turn.metadata.get("taken_over", 0) + 1}
        if still_dead.update(
            status=Turn.Status.QUEUED,
            heartbeat_at=now,
            dispatched_at=now,
            metadata=taken,
            pending_approval=None,
        ):
            done.requeued.append(turn)
        return
    stale = settings.AGENT_TURN_STALE_SECONDS
    tries = f"{turn.attempts} time{'s' if turn.attempts != 1 else ''}"
    error = WORKER_DIED.format(attempts=tries, seconds=stale)
    failed = _end_dropping_writes(
        turn.pk,
        turn.session_id,
        still_dead,
        status=Turn.Status.FAILED,
        error=error,
        finished_at=now,
        pending_approval=None,
        metadata=recorded,
    )
    if failed:
        turn.error = error
        done.failed.append(turn)
        events.turn_failed(session=turn.session_id, turn=turn.pk, error=error)


def _fail_lost(turn: Turn, cutoff: datetime, now: datetime, done: Recovery) -> None:
    """Fail a queued turn no worker picked up within TURN_QUEUE_TIMEOUT."""
    error = NOT_PICKED_UP.format(seconds=settings.TURN_QUEUE_TIMEOUT)
    waiting = Turn.objects.filter(_unclaimed_since(cutoff), pk=turn.pk, status=Turn.Status.QUEUED)
    values = {"status": Turn.Status.FAILED, "error": error, "finished_at": now}
    if turn.attempts:  # run before, then queued again: its earlier attempts' writes go
        failed = _end_dropping_writes(turn.pk, turn.session_id, waiting, **values)
    else:  # never run: nothing written, no lock needed
        failed = waiting.update(**values) == 1
    if failed:
        turn.error = error
        done.failed.append(turn)
        events.turn_failed(session=turn.session_id, turn=turn.pk, error=error)


def _redispatch(turn: Turn, now: datetime, done: Recovery) -> None:
    """Mark a queued turn no worker claimed in TURN_REDISPATCH_SECONDS as sent now, into
    `done.redispatched`. Conditional on the time it was last sent, so of two recoveries at
    once only one sends it."""
    sent = Turn.objects.filter(
        pk=turn.pk, status=Turn.Status.QUEUED, dispatched_at=turn.dispatched_at
    ).update(dispatched_at=now)
    if sent:
        done.redispatched.append(turn)


@dataclass
class NewMessage:
    role: str
    content: str = ""
    tool_name: str = ""
    tool_args: Any = None
    tool_result: str = ""
    tool_call_id: str = ""
    tool_calls: Any = None
    metadata: JSONObject = field(default_factory=dict)
    effect: str = ""  # a tool message's: none, workspace or external (Message.effect)


def _effect(m: NewMessage) -> str:
    """A tool message's effect as stored: one of Effect's, `external` when it names none (the
    safe assumption); empty for the other roles."""
    if m.role != Message.Role.TOOL:
        return ""
    return m.effect if m.effect in Effect.values else Effect.EXTERNAL


class BranchMoved(Exception):
    """The turn's branch no longer ends with the turn's user message."""


class TurnTakenOver(BranchMoved):
    """This worker's attempt is no longer the turn's: it was taken over, or ended meanwhile."""


@transaction.atomic
def turn_store_messages(*, turn: Turn, messages: list[NewMessage]) -> Branch:
    """Append the agent's messages after the turn's user message, in one transaction. Only the
    worker holding the turn's current attempt may; text the database cannot store is cleaned."""
    if turn.branch_id is None:
        raise BranchMoved("The branch this turn was answering on has been deleted.")
    lock_session(turn.session_id)
    # The turn's row (still this attempt's?) and its branch's, both locked, in one query.
    # (The filter on the branch's session makes the join an inner one, which FOR UPDATE needs.)
    owned = (
        _owned(turn)
        .filter(branch__session_id=turn.session_id)
        .select_for_update()
        .select_related("branch")
        .first()
    )
    if owned is None or owned.branch is None:
        if _owned(turn).exists():  # still this attempt's: its branch is gone
            raise BranchMoved("The branch this turn was answering on has been deleted.")
        raise TurnTakenOver(
            "This turn was given up on or handed to another worker before this answer "
            "arrived, so the answer was not added."
        )
    branch = owned.branch
    if branch.message_count != (turn.user_message_position or 0) + 1:
        raise BranchMoved(
            "The conversation was rewound or changed while the agent was answering, "
            "so the reply was not added."
        )
    start = branch.message_count
    limit = settings.AGENT_MAX_REPLY_CHARS
    stored = Message.objects.bulk_create(
        [
            Message(
                branch=branch,
                position=start + i,
                role=m.role,
                content=bounded(storable_text(m.content or ""), limit),
                tool_name=storable_text(m.tool_name or "")[:200],
                tool_args=storable_json(_bounded_json(m.tool_args, limit)),
                tool_result=bounded(storable_text(m.tool_result or ""), limit),
                tool_call_id=storable_text(m.tool_call_id or "")[:200],
                tool_calls=storable_json(_bounded_calls(m.tool_calls, limit)),
                effect=_effect(m),
                metadata=storable_json(m.metadata),
            )
            for i, m in enumerate(messages)
        ]
    )
    # The turn's reply is its last assistant message: turn_finish records the reference.
    last = stored[-1] if stored and stored[-1].role == Message.Role.ASSISTANT else None
    turn.reply_message = last
    branch.message_count = start + len(messages)
    Branch.objects.filter(pk=branch.pk).update(message_count=branch.message_count)
    Session.objects.filter(pk=turn.session_id).update(updated_at=timezone.now())
    return branch


def turn_finish(
    *,
    turn: Turn,
    reply: str,
    tools_used: list[str],
    checkpoint: Checkpoint | None = None,
    rolled_back_to: Checkpoint | None = None,
    metadata: JSONObject | None = None,
) -> bool:
    """Mark the caller's running attempt of the turn done. False when the turn is no longer the
    caller's (taken over, or failed meanwhile): then nothing changes."""
    text = bounded(storable_text(reply), settings.AGENT_MAX_REPLY_CHARS)
    meta = {**turn.metadata, **(metadata or {})}
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
    done = _owned(turn).update(
        status=Turn.Status.DONE,
        checkpoint=checkpoint,
        rolled_back_to=rolled_back_to,
        reply_message=stored,
        **values,
    )
    if done:  # otherwise `turn` keeps the caller's attempt: it is the caller's token
        # What the update wrote, without reading the row back.
        turn.status = Turn.Status.DONE
        turn.tools_used = values["tools_used"]
        turn.checkpoint = checkpoint
        turn.rolled_back_to = rolled_back_to
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
    failed = _end_dropping_writes(
        turn.pk,
        turn.session_id,
        Turn.objects.filter(pk=turn.pk, status__in=Turn.ACTIVE, attempts=turn.attempts),
        status=Turn.Status.FAILED,
        error=storable_text(error)[:4000],
        finished_at=timezone.now(),
        pending_approval=None,
        metadata=storable_json({**turn.metadata, **(metadata or {})}),
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
    the worker, once it notices, only adds its metadata. What the turn's
    agent wrote to the workspace is deleted with it (its tool messages are never stored). A turn
    paused for an approval ends its wait too (`tool.approval_answered`, reason "cancelled"): the
    call never runs."""
    with transaction.atomic():
        waiting = (
            Turn.objects.filter(pk=turn.pk, status=Turn.Status.AWAITING_APPROVAL)
            .values_list("pending_approval", flat=True)
            .first()
        )
        cancelled = _end_dropping_writes(
            turn.pk,
            turn.session_id,
            Turn.objects.filter(pk=turn.pk, status__in=Turn.ACTIVE),
            status=Turn.Status.CANCELLED,
            finished_at=timezone.now(),
            pending_approval=None,
        )
        if cancelled:
            _keep_shown(turn.pk)
            events.turn_cancelled(session=turn.session_id, turn=turn.pk)
            if isinstance(waiting, dict) and isinstance(waiting.get("tool_call_id"), str):
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


def _keep_shown(turn_id: int) -> None:
    """Keep what a just-cancelled turn streamed so far (read from its stream: what the pages
    show) as its stopped reply. Inside turn_cancel's transaction, under the session's lock."""
    turn = Turn.objects.select_related("session").filter(pk=turn_id).first()
    if turn is None or not turn.attempts:
        return  # never claimed: nothing was streamed
    shown = stream_snapshot(turn_id=turn.pk, attempt=turn.attempts).text
    metadata: JSONObject = {"model": _model_label(turn)}
    if is_demo():
        metadata["demo"] = True
    _keep_locked(turn, shown, metadata)


def _model_label(turn: Turn) -> str:
    """The model a turn's session asks for, as the worker labels it (agents.model.model_label)."""
    if is_demo():
        return DEMO_MODEL_ID
    session_settings = turn.session.settings if turn.session_id else {}
    try:
        return chosen_model(session_settings) or settings.AGENT_MODEL
    except InvalidInput:
        return str(settings.AGENT_MODEL)


@transaction.atomic
def turn_keep_stopped(*, turn: Turn, reply: str, metadata: JSONObject | None = None) -> bool:
    """Store what the worker of `turn`'s attempt streamed before the turn was cancelled, as the
    assistant's reply marked {"stopped": true}, so it can be continued or regenerated. Only once,
    only for a cancelled turn of that attempt, and only while its branch still ends with the
    turn's user message. When the cancel already kept the reply shown (`turn_cancel`), its text
    stays as the pages show it and the worker's metadata (model, usage, latency) is added to it.
    False when nothing was stored."""
    if turn.branch_id is None:
        return False
    lock_session(turn.session_id)
    kept = (
        Turn.objects.filter(pk=turn.pk, status=Turn.Status.CANCELLED, attempts=turn.attempts)
        .values_list("reply_message_id", flat=True)
        .first()
    )
    if kept is not None:
        shown = Message.objects.select_for_update().filter(pk=kept).first()
        if shown is None or not shown.metadata.get("stopped"):
            return False
        extra = {k: v for k, v in (metadata or {}).items() if k not in ("stopped", "finish_reason")}
        Message.objects.filter(pk=kept).update(metadata=storable_json({**shown.metadata, **extra}))
        return False
    return _keep_locked(turn, reply, metadata)


def _keep_locked(turn: Turn, reply: str, metadata: JSONObject | None) -> bool:
    """turn_keep_stopped's store, under the session's lock."""
    text = bounded(storable_text(reply), settings.AGENT_MAX_REPLY_CHARS)
    if not text.strip() or turn.branch_id is None:
        return False
    mine = Turn.objects.select_for_update().filter(
        pk=turn.pk,
        status=Turn.Status.CANCELLED,
        attempts=turn.attempts,
        reply_message__isnull=True,
    )
    if not mine.exists():
        return False
    branch = Branch.objects.select_for_update().filter(pk=turn.branch_id).first()
    if branch is None or branch.message_count != (turn.user_message_position or 0) + 1:
        return False
    continues = continued_reply(turn)  # a stopped continuation still extends its reply
    kept = message_append(
        branch=branch,
        role=Message.Role.ASSISTANT,
        content=text,
        metadata={
            **(metadata or {}),
            **({"continues": continues} if continues is not None else {}),
            "stopped": True,
            "finish_reason": "cancelled",
        },
    )
    mine.update(reply_message=kept)
    turn.reply_message = kept
    return True
