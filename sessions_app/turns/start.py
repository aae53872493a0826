"""Starting a turn: a user's message (`turn_start`), continuing a cut-off reply
(`turn_continue`), retrying a failed turn (`turn_retry`), and a worker's claim of a queued
turn (`turn_claim`), which counts the attempt that is its fencing token."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from access.selectors import model_check
from core import events, logs
from core.db import one_row
from core.errors import InvalidInput
from core.model_choice import chosen_model
from sessions_app.errors import BranchNotFound, SessionNotFound, TurnInProgress

from ..approvals import PAUSED_KEY
from ..hooks import checkpoint_before_message, turn_admission, turn_writes_drop
from ..models import Branch, Message, Session, Turn
from ..reply_stream import stream_reset
from ..selectors import branch_history
from ..services import lock_session, lock_session_touched, message_append_locked, session_update
from .texts import clean_user_message, is_cut_off


def checkpoint_each_message(session: Session) -> bool:
    """Whether a checkpoint is taken before each message sent in `session`: its own setting
    (settings.checkpoint_each_message), else its owner's preference, else not."""
    value = session.settings.get("checkpoint_each_message")
    if isinstance(value, bool):
        return value
    return session.owner.preference("checkpoint_each_message") is True


def _origin() -> dict[str, Any]:
    """The id of the request queuing a turn, kept on it: the worker's log lines for the turn
    carry it (Turn.log_ids)."""
    request_id = logs.current().get("request_id")
    return {"request_id": request_id} if request_id else {}


def turn_admit(session: Session, model: str | None = None) -> None:
    """Refuse a turn of `session` before anything is stored or sent to a model: its owner's
    access must include the model that would answer (`model`, asked for this turn only, else
    the session's own choice, else their default: access.selectors.model_check, a 400), and no
    budget of theirs may be used up (usage.selectors.budget_check, a 429). Checked as a turn is
    queued, and again as a worker first claims it (agents.turn.pipeline)."""
    try:
        asked = model or chosen_model(session.settings)
    except InvalidInput:
        asked = None  # a choice no longer allowed at all: the worker refuses it (agents.model)
    model_check(session.owner, asked)
    turn_admission(session)


def turn_start(
    *,
    session: Session,
    message: Any,
    branch: Branch | None = None,
    idempotency_key: str = "",
    request_fingerprint: str = "",
    model: str | None = None,
) -> Turn:
    """Queue a turn on the session's current branch (or on `branch`) and store the user's
    message. Empty or oversized messages are refused before anything is written. `model`
    (already checked: core.model_choice.turn_model) answers this turn instead of the session's
    model (`metadata.turn_model`, agents.worker). With an idempotency key,
    `request_fingerprint` (a digest of the request that carried it) is kept with the turn, so
    a later request with the same key can be told apart (agents.services).
    A message sent in an archived session brings it back (announced like any unarchiving).
    The session's lock is scoped to `session.owner_id`: a session that is not (or no longer)
    theirs is SessionNotFound, so `session` may be an unread reference
    (sessions_app.selectors.session_ref_for_user); the turn returned holds the row as read
    under the lock."""
    text = clean_user_message(message)
    if branch is not None and branch.session_id != session.pk:
        raise BranchNotFound()
    try:
        with transaction.atomic():
            lock_session_touched(session.pk, owner_id=session.owner_id)
            # Under the session's lock, which every writer of a branch takes first, in one
            # read: the branch (its message_count is the one to append at), the session as it
            # is now, and whether a turn of the session is still in progress.
            rows = (
                Branch.objects.select_for_update(of=("self",))
                .select_related("session__owner")  # its preferences: no query more
                .annotate(
                    busy=Exists(Turn.objects.filter(session_id=OuterRef("session_id")).active())
                )
                .filter(session_id=session.pk)
            )
            # One row: one current branch per session (a unique index), or the one named.
            locked = one_row(
                rows.filter(is_current=True) if branch is None else rows.filter(pk=branch.pk)
            )
            if locked is None:
                raise BranchNotFound()
            if getattr(locked, "busy", False):
                raise TurnInProgress()
            turn_admit(locked.session, model)
            if locked.session.archived_at is not None:
                session_update(session=locked.session, archived=False)
                session.archived_at = None
            branch = branch or locked
            if checkpoint_each_message(locked.session):
                checkpoint_before_message(locked, text)
            stored = message_append_locked(
                branch=branch, locked=locked, role=Message.Role.USER, content=text
            )
            return Turn.objects.create(
                session=locked.session,
                branch=branch,
                user_message=stored,
                user_message_position=stored.position,
                metadata={
                    "user_message_id": stored.pk,
                    **_origin(),
                    **({"request_fingerprint": request_fingerprint} if idempotency_key else {}),
                    **({TURN_MODEL_KEY: model} if model else {}),
                },
                idempotency_key=idempotency_key,
            )
    except IntegrityError:
        # Two requests raced past the check; the partial unique index stopped the second.
        raise TurnInProgress() from None


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
            turn_admit(session)
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
        model = turn_model_of(turn)  # a reply regenerated with another model: that one again
        if branch is None or position is None or branch.message_count != position + 1:
            return turn_start(session=turn.session, message=turn.message, model=model)
        turn_admit(turn.session, model)
        return Turn.objects.create(
            session_id=turn.session_id,
            branch=branch,
            user_message_id=turn.user_message_id,
            user_message_position=position,
            metadata={
                "retry_of": turn.pk,
                **_origin(),
                **({TURN_MODEL_KEY: model} if model else {}),
            },
        )


# In a turn's metadata: the model that answers it, when it is not the session's.
TURN_MODEL_KEY = "turn_model"


def turn_model_of(turn: Turn) -> str | None:
    """The model asked for this turn only (a reply regenerated with another model), or None:
    the session's."""
    value = turn.metadata.get(TURN_MODEL_KEY) if isinstance(turn.metadata, dict) else None
    return value if isinstance(value, str) and value else None


# What a claim reads with the turn, for the worker that builds its agent from them (no second read:
# agents.worker.agent_for_turn).
CLAIM_READS = ("session", "session__owner", "branch", "user_message")


def _queued(turn_id: int, looks: Mapping[str, Any]) -> QuerySet[Turn]:
    """The turn, while queued, with what a claim reads with it and the claimer's looks."""
    return (
        Turn.objects.select_related(*CLAIM_READS)
        .annotate(**looks)
        .filter(pk=turn_id, status=Turn.Status.QUEUED)
    )


def _claim_first_attempt(
    turn_id: int, worker: str, now: datetime, looks: Mapping[str, Any]
) -> Turn | Literal[False] | None:
    """The claim of a turn never run before (almost every claim), in two statements and no
    transaction: the turn read, then moved to running by one update conditional on its still
    being queued and never claimed. False when it is not queued; None when it was claimed before
    (a take-over: `turn_claim`'s locked path, which drops the earlier attempts' writes)."""
    turn = one_row(_queued(turn_id, looks))
    if turn is None:
        return False
    if turn.attempts:
        return None
    metadata = {**turn.metadata, "worker": worker} if worker else turn.metadata
    claimed = Turn.objects.filter(pk=turn_id, status=Turn.Status.QUEUED, attempts=0).update(
        status=Turn.Status.RUNNING,
        attempts=1,
        started_at=now,
        heartbeat_at=now,
        metadata=metadata,
    )
    if not claimed:  # another worker's claim, or a cancel, came first
        return False
    turn.status = Turn.Status.RUNNING
    turn.attempts = 1
    turn.started_at = turn.heartbeat_at = now
    turn.metadata = metadata
    events.turn_started(session=turn.session_id, turn=turn.pk, branch=turn.branch_id, attempt=1)
    stream_reset(turn_id=turn.pk, attempt=1)
    return turn


def turn_claim(
    *, turn_id: int, worker: str = "", looks: Mapping[str, Any] | None = None
) -> Turn | None:
    """Move a queued turn to running and return it, its `attempts` counting this claim (the
    claimer's fencing token) and `metadata.worker` naming the claimer (host:pid). None when it is
    not queued: a redelivered task, a turn another worker took, a finished turn, a deleted
    session. A turn claimed before (taken over from a worker that died) runs again from its
    start: what its earlier attempts wrote to the workspace is deleted in the same transaction.
    `looks`: expressions the claim's read annotates the turn with (what the claimer would
    otherwise ask in queries of its own: agents.turn.claim.claim_looks)."""
    now = timezone.now()
    looks = dict(looks or {})
    first = _claim_first_attempt(turn_id, worker, now, looks)
    if first is not None:
        return first or None
    session_id: int | None = None
    while True:
        with transaction.atomic():
            if session_id is not None:
                try:
                    lock_session(session_id)
                except SessionNotFound:
                    return None
            turn = one_row(_queued(turn_id, looks).select_for_update(of=("self",)))
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
            if turn.attempts > 1 and PAUSED_KEY not in turn.metadata:
                # A paused turn's continuation resumes from its saved state: what its earlier
                # attempts wrote stays (sessions_app.approvals).
                turn_writes_drop(turn.pk)
            events.turn_started(
                session=turn.session_id, turn=turn.pk, branch=turn.branch_id, attempt=turn.attempts
            )
        # Outside the transaction (no lock held while the store answers), before any piece.
        stream_reset(turn_id=turn.pk, attempt=turn.attempts)
        return turn
