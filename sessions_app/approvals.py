"""Approvals: a tool call that waits for its owner's answer before it runs.

An approval belongs to one call of one attempt of a turn, never to a tool-call id alone: model
servers repeat ids, and an answer keyed by the id would let a second call with other arguments
run unasked. So a call that waits is named by the turn's attempt and its place among that
attempt's calls that waited (`call`: 1, 2, ...), and carries its id, its tool and a hash of its
exact arguments (`args_sha256`). An answer is kept under that attempt and place
(`metadata.approvals["<attempt>:<call>"]`) with the same facts, and a continuation takes it only
when all of them match the call it is about to run.

A turn that meets such a call pauses holding nothing (`turn_await_approval`): it goes to
`awaiting_approval` with the call in `pending_approval` and the run's state saved in
`metadata.paused` (sessions_app.turns.paused; agents.approval_gate builds it), fenced by the
worker's attempt, and `tool.approval_requested` goes out; the worker's task then ends. The owner
answers (`turn_approve`, from the API, the page, Telegram or the terminal): the answer is kept,
the turn goes back to `queued`, and its continuation is queued after commit (`set_continuation`:
agents.dispatch), which resumes from the saved state on any worker. Nobody answering within
AGENT_APPROVAL_SECONDS counts as a refusal: the recovery job records it (`turn_approval_expire`,
reason "timed_out") and queues the continuation. A Stop ends the wait too
(sessions_app.turns.turn_cancel, reason "cancelled"). Each end is said once, with
`tool.approval_answered`. An answer to anything but the call that waits now is refused with
`NothingAwaitsApproval` (409) saying why (sessions_app.approval_checks).

A call that a dead worker's attempt (or a continuation killed mid-call) may have run is on record
in `metadata.may_have_run`, which no rewind, restore, Stop or take-over removes; it is never run
again unasked, and a new attempt's card for the same call says it may already have run.

Every change is one conditional update on the turn's status, so of an answer, a time-out and a
cancel arriving together exactly one wins, and the others change nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, NotRequired, TypedDict, cast

from django.db import transaction
from django.utils import timezone

from core import events
from core.validation import JSONObject, storable_json

from .approval_checks import (
    APPROVALS_KEY,
    NOT_WAITING,
    answers_of,
    clean_answer,
    mismatch,
    refusal,
)
from .errors import NothingAwaitsApproval, TurnNotFound
from .models import Turn

PAUSED_KEY = "paused"
MAY_HAVE_RUN_KEY = "may_have_run"

MAY_HAVE_RUN_NOTE = (
    "This call may already have run: attempt {attempt} of this turn approved the same call "
    "(same tool, same arguments) and its worker stopped before it could say whether the tool "
    "finished. Approving runs it again."
)


class Call(TypedDict):
    """One call of one attempt, as an approval names it."""

    tool_call_id: str
    tool_name: str
    args: Any
    args_sha256: str
    attempt: int
    call: int  # its place among the calls of this attempt that waited: 1, 2, ...


class MayHaveRun(Call):
    """A call an earlier attempt approved, whose worker died before the turn ended: it may
    have run. In `Turn.metadata["may_have_run"]` (a list, oldest first)."""

    answered_at: str
    recorded_at: str


class Pending(Call):
    """`Turn.pending_approval` while the turn waits."""

    may_have_run: NotRequired[int]  # the earlier attempt that approved this same call


class Answer(Call):
    """One answered call, in `Turn.metadata["approvals"]["<attempt>:<call>"]`."""

    approved: bool
    reason: str  # "approved", "refused", "timed_out"
    answered_at: str


def args_digest(args: object) -> str:
    """The sha256 of a call's arguments as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def call_key(attempt: int, call: int) -> str:
    return f"{attempt}:{call}"


def result_key(call_id: str, args: object) -> str:
    """How a paused turn keeps a call's result: by its id and the hash of its arguments (model
    servers repeat ids within one batch)."""
    return f"{call_id}|{args_digest(args if args is not None else {})}"


def tool_call_key(call: dict[str, Any]) -> str:
    """`result_key` of a call as the assistant message holds it (arguments as JSON text)."""
    fn = call.get("function") or {}
    raw = fn.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) and raw else (raw or {})
    except ValueError:
        args = raw
    return result_key(str(call.get("id") or ""), args)


def same_call(record: object, pending: Pending) -> bool:
    """Whether a stored answer (or record) is about exactly the call `pending`."""
    if not isinstance(record, dict):
        return False
    return all(
        record.get(key) == pending[key]
        for key in ("tool_call_id", "tool_name", "args_sha256", "attempt", "call")
    )


def answer_for(turn_metadata: object, pending: Pending) -> Answer | None:
    """The answer recorded for exactly this call (its attempt, place, id, tool and arguments),
    or None while nobody answered it."""
    answer = answers_of(turn_metadata).get(call_key(pending["attempt"], pending["call"]))
    return cast("Answer", answer) if same_call(answer, pending) else None


def may_have_run(turn_metadata: object) -> list[MayHaveRun]:
    """The calls earlier attempts approved and that may have run, oldest first."""
    records = turn_metadata.get(MAY_HAVE_RUN_KEY) if isinstance(turn_metadata, dict) else None
    if not isinstance(records, list):
        return []
    return [cast("MayHaveRun", r) for r in records if isinstance(r, dict)]


def pending_call(*, turn: Turn, call: int, tool_call_id: str, tool_name: str, args: Any) -> Pending:
    """The call the worker holding `turn`'s attempt is about to ask for; marked when an earlier
    attempt approved the same tool with the same arguments (it may have run)."""
    digest = args_digest(args)
    pending: Pending = {
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "args": storable_json(args),
        "args_sha256": digest,
        "attempt": turn.attempts,
        "call": call,
    }
    for record in may_have_run(turn.metadata):
        if record.get("tool_name") == tool_name and record.get("args_sha256") == digest:
            pending["may_have_run"] = int(record.get("attempt") or 0)
    return pending


def may_have_run_note(pending: object) -> str | None:
    """What the card, the API and Telegram say of a call that may already have run."""
    if not isinstance(pending, dict) or not pending.get("may_have_run"):
        return None
    return MAY_HAVE_RUN_NOTE.format(attempt=pending["may_have_run"])


def turn_await_approval(*, turn: Turn, pending: Pending, paused: JSONObject) -> bool:
    """The worker holding `turn`'s attempt pauses it before the call `pending` (made by
    `pending_call`), saving the run's state `paused` (agents.approval_gate) on the turn's row in
    the same update: the worker then ends its attempt, and the answer queues a continuation that
    resumes from it. False when the turn is no longer its own (cancelled, taken over): the call
    must not run."""
    with transaction.atomic():
        mine = Turn.objects.filter(
            pk=turn.pk, status=Turn.Status.RUNNING, attempts=pending["attempt"]
        )
        metadata = mine.values_list("metadata", flat=True).first()
        if not isinstance(metadata, dict):
            return False
        saved = {**metadata, PAUSED_KEY: {**paused, "pending": dict(pending)}}
        paused_rows = mine.update(
            status=Turn.Status.AWAITING_APPROVAL,
            pending_approval=dict(pending),
            heartbeat_at=timezone.now(),
            metadata=saved,
        )
        if paused_rows:
            events.tool_approval_requested(
                session=turn.session_id,
                turn=turn.pk,
                tool_call_id=pending["tool_call_id"],
                tool_name=pending["tool_name"],
                args=pending["args"],
                call=pending["call"],
                attempt=pending["attempt"],
                note=may_have_run_note(pending),
            )
    if paused_rows:
        turn.status = Turn.Status.AWAITING_APPROVAL
        turn.pending_approval = dict(pending)
        turn.metadata = saved
    return paused_rows == 1


def turn_approve(
    *,
    turn: Turn,
    tool_call_id: object,
    approved: object,
    call: object = None,
    attempt: object = None,
    resume: bool = True,
) -> Turn:
    """The owner's answer to the call `turn` waits for (the caller looked the turn up for its
    owner). The turn goes back to running and its worker runs the tool, or tells the model it was
    refused. `call` and `attempt` (from `pending_approval`) name the call unambiguously; without
    them the id must be one no answered call of the turn had. NothingAwaitsApproval (409), with
    the reason, for an answer to anything but the call that waits now (the turn ended, the call
    was answered already, a call of an earlier attempt, another call); InvalidInput (400) for a
    bad body."""
    call_id, yes = clean_answer(tool_call_id, approved, call, attempt)
    place = cast("int | None", call)
    given_attempt = cast("int | None", attempt)
    with transaction.atomic():
        row = Turn.objects.select_for_update().filter(pk=turn.pk).first()
        if row is None:
            raise TurnNotFound()
        pending = row.pending_approval if isinstance(row.pending_approval, dict) else None
        if row.status != Turn.Status.AWAITING_APPROVAL or pending is None:
            raise NothingAwaitsApproval(refusal(row, call_id, place, given_attempt))
        wrong = mismatch(row, pending, call_id, place, given_attempt)
        if wrong is not None:
            raise NothingAwaitsApproval(wrong)
        _answer(row, cast("Pending", pending), yes, resume=resume)
    return Turn.objects.select_related("user_message", "reply_message").get(pk=turn.pk)


def _answer(row: Turn, pending: Pending, yes: bool, *, resume: bool = True) -> None:
    reason = "approved" if yes else "refused"
    answer = _answer_of(pending, approved=yes, reason=reason)
    metadata = _with_answer(row.metadata, answer)
    now = timezone.now()
    answered = Turn.objects.filter(
        pk=row.pk, status=Turn.Status.AWAITING_APPROVAL, attempts=row.attempts
    ).update(
        status=Turn.Status.QUEUED,
        pending_approval=None,
        metadata=metadata,
        heartbeat_at=now,
        dispatched_at=now,
    )
    if not answered:  # cannot happen under the row's lock; said plainly if it ever does
        raise NothingAwaitsApproval(NOT_WAITING)
    if resume:
        _continue_after_commit(row.pk)
    events.tool_approval_answered(
        session=row.session_id,
        turn=row.pk,
        tool_call_id=pending["tool_call_id"],
        approved=yes,
        reason=reason,
    )


def _answer_of(pending: Pending, *, approved: bool, reason: str) -> Answer:
    return {
        "tool_call_id": pending["tool_call_id"],
        "tool_name": pending["tool_name"],
        "args": pending["args"],
        "args_sha256": pending["args_sha256"],
        "attempt": pending["attempt"],
        "call": pending["call"],
        "approved": approved,
        "reason": reason,
        "answered_at": timezone.now().isoformat(),
    }


def _with_answer(metadata: JSONObject, answer: Answer) -> JSONObject:
    kept = dict(answers_of(metadata))
    kept[call_key(answer["attempt"], answer["call"])] = dict(answer)
    return {**metadata, APPROVALS_KEY: kept}


def turn_approval_expire(*, turn: Turn) -> bool:
    """Nobody answered within AGENT_APPROVAL_SECONDS (the recovery job finds it): a refusal is
    recorded (reason "timed_out") and the turn is queued for its continuation, which tells the
    model. False when the wait had already ended otherwise (answered, cancelled)."""
    with transaction.atomic():
        waiting = Turn.objects.select_for_update().filter(
            pk=turn.pk, status=Turn.Status.AWAITING_APPROVAL
        )
        row = waiting.first()
        if row is None or not isinstance(row.pending_approval, dict):
            return False
        pending = cast("Pending", row.pending_approval)
        answer = _answer_of(pending, approved=False, reason="timed_out")
        metadata = _with_answer(row.metadata or {}, answer)
        now = timezone.now()
        expired = waiting.update(
            status=Turn.Status.QUEUED,
            pending_approval=None,
            metadata=metadata,
            heartbeat_at=now,
            dispatched_at=now,
        )
        if expired:
            events.tool_approval_answered(
                session=row.session_id,
                turn=row.pk,
                tool_call_id=pending["tool_call_id"],
                approved=False,
                reason="timed_out",
            )
    return expired == 1


# Who runs a continuation: set at start by the package that runs turns (agents.apps sets
# agents.dispatch.enqueue_turn), which this package sits below.
_continuation: Callable[[int], None] | None = None


def set_continuation(run: Callable[[int], None]) -> None:
    """How an answered turn's continuation is queued (called once, by agents.apps)."""
    global _continuation
    _continuation = run


def _continue_after_commit(turn_id: int) -> None:
    run = _continuation
    if run is not None:
        transaction.on_commit(lambda: run(turn_id))
