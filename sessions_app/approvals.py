"""Approvals: a tool call that waits for its owner's answer before it runs.

The worker running a turn asks (`turn_await_approval`): the turn goes to `awaiting_approval` with
the call in `pending_approval`, fenced by the worker's attempt like every other update the worker
makes, and `tool.approval_requested` goes out. The owner answers (`turn_approve`, from the API or
the page): the turn goes back to `running` and the answer is kept in the turn's metadata
(`approvals`, by tool call id), where the waiting worker reads it. Nobody answering within
AGENT_APPROVAL_SECONDS counts as a refusal: the worker records it itself
(`turn_approval_expire`, reason "timed_out"). A cancel during the wait ends it too
(sessions_app.turns.turn_cancel, reason "cancelled"). Each end is said once, with
`tool.approval_answered`.

Every change is one conditional update on the turn's status, so of an answer, a time-out and a
cancel arriving together exactly one wins, and the others change nothing.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

from django.db import transaction
from django.utils import timezone

from core import events
from core.errors import InvalidInput
from core.validation import JSONObject, storable_json

from .errors import NothingAwaitsApproval, TurnNotFound
from .models import Turn

APPROVALS_KEY = "approvals"
MAX_CALL_ID = 200


class Pending(TypedDict):
    """`Turn.pending_approval` while the turn waits."""

    tool_call_id: str
    tool_name: str
    args: Any


class Answer(TypedDict):
    """One answered call, in `Turn.metadata["approvals"][tool_call_id]`."""

    tool_name: str
    args: Any
    approved: bool
    reason: str  # "approved", "refused", "timed_out"


def answer_of(turn_metadata: object, tool_call_id: str) -> Answer | None:
    """The answer recorded for a tool call of the turn, or None while nobody answered."""
    answers = turn_metadata.get(APPROVALS_KEY) if isinstance(turn_metadata, dict) else None
    answer = answers.get(tool_call_id) if isinstance(answers, dict) else None
    return cast("Answer", answer) if isinstance(answer, dict) else None


def _with_answer(metadata: JSONObject, tool_call_id: str, answer: Answer) -> JSONObject:
    answers = metadata.get(APPROVALS_KEY)
    kept = dict(answers) if isinstance(answers, dict) else {}
    kept[tool_call_id] = dict(answer)
    return {**metadata, APPROVALS_KEY: kept}


def turn_await_approval(*, turn: Turn, tool_call_id: str, tool_name: str, args: Any) -> bool:
    """The worker holding `turn`'s attempt pauses it before a tool call that needs approval.
    False when the turn is no longer its own (cancelled, taken over): the call must not run."""
    pending: Pending = {
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "args": storable_json(args),
    }
    with transaction.atomic():
        paused = Turn.objects.filter(
            pk=turn.pk, status=Turn.Status.RUNNING, attempts=turn.attempts
        ).update(
            status=Turn.Status.AWAITING_APPROVAL,
            pending_approval=dict(pending),
            heartbeat_at=timezone.now(),
        )
        if paused:
            events.tool_approval_requested(
                session=turn.session_id,
                turn=turn.pk,
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                args=pending["args"],
            )
    if paused:
        turn.status = Turn.Status.AWAITING_APPROVAL
        turn.pending_approval = dict(pending)
    return paused == 1


def clean_answer(tool_call_id: object, approved: object) -> tuple[str, bool]:
    """An approval's body: `tool_call_id` a non-empty text, `approved` true or false."""
    if not isinstance(tool_call_id, str) or not tool_call_id.strip():
        raise InvalidInput("tool_call_id must be the id of the tool call that waits (a text).")
    if len(tool_call_id) > MAX_CALL_ID:
        raise InvalidInput(f"tool_call_id is longer than {MAX_CALL_ID} characters.")
    if not isinstance(approved, bool):
        raise InvalidInput("approved must be true or false.")
    return tool_call_id, approved


def turn_approve(*, turn: Turn, tool_call_id: object, approved: object) -> Turn:
    """The owner's answer to the call `turn` waits for (the caller looked the turn up for its
    owner). The turn goes back to running and its worker runs the tool, or tells the model it was
    refused. The same answer again changes nothing and returns the turn; NothingAwaitsApproval
    (409) when the turn waits for no call of that id; InvalidInput (400) for a bad body."""
    call_id, yes = clean_answer(tool_call_id, approved)
    with transaction.atomic():
        row = Turn.objects.select_for_update().filter(pk=turn.pk).first()
        if row is None:
            raise TurnNotFound()
        pending = row.pending_approval if isinstance(row.pending_approval, dict) else {}
        if row.status == Turn.Status.AWAITING_APPROVAL and pending.get("tool_call_id") == call_id:
            reason = "approved" if yes else "refused"
            answer: Answer = {
                "tool_name": str(pending.get("tool_name", "")),
                "args": pending.get("args"),
                "approved": yes,
                "reason": reason,
            }
            metadata = _with_answer(row.metadata, call_id, answer)
            answered = Turn.objects.filter(
                pk=row.pk, status=Turn.Status.AWAITING_APPROVAL, attempts=row.attempts
            ).update(status=Turn.Status.RUNNING, pending_approval=None, metadata=metadata)
            if answered:
                events.tool_approval_answered(
                    session=row.session_id,
                    turn=row.pk,
                    tool_call_id=call_id,
                    approved=yes,
                    reason=reason,
                )
    row = Turn.objects.select_related("user_message", "reply_message").get(pk=turn.pk)
    given = answer_of(row.metadata, call_id)
    if given is None or given["approved"] != yes or given["reason"] == "timed_out":
        raise NothingAwaitsApproval()
    return row


def turn_approval_expire(*, turn: Turn, tool_call_id: str) -> bool:
    """Nobody answered within AGENT_APPROVAL_SECONDS: the worker holding `turn`'s attempt
    records a refusal (reason "timed_out") and the turn goes back to running. False when the
    wait had already ended otherwise (answered, cancelled, taken over)."""
    with transaction.atomic():
        waiting = Turn.objects.filter(
            pk=turn.pk, status=Turn.Status.AWAITING_APPROVAL, attempts=turn.attempts
        )
        row = waiting.values("metadata", "pending_approval").first()
        pending = row["pending_approval"] if row is not None else None
        if row is None or not isinstance(pending, dict):
            return False
        if pending.get("tool_call_id") != tool_call_id:
            return False
        answer: Answer = {
            "tool_name": str(pending.get("tool_name", "")),
            "args": pending.get("args"),
            "approved": False,
            "reason": "timed_out",
        }
        metadata = _with_answer(row["metadata"] or {}, tool_call_id, answer)
        expired = waiting.update(
            status=Turn.Status.RUNNING, pending_approval=None, metadata=metadata
        )
        if expired:
            events.tool_approval_answered(
                session=turn.session_id,
                turn=turn.pk,
                tool_call_id=tool_call_id,
                approved=False,
                reason="timed_out",
            )
    return expired == 1
