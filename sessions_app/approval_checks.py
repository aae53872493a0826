"""What an answer to an approval is checked against: its body (`clean_answer`), and why it
names nothing that waits (`refusal`) or another call than the one that waits (`mismatch`): the
409's detail. The answers a turn keeps are `metadata.approvals` (`answers_of`)."""

from __future__ import annotations

from typing import Any

from core.errors import InvalidInput

from .models import Turn

APPROVALS_KEY = "approvals"
MAX_CALL_ID = 200

ENDED = "This turn has ended ({status}): nothing waits for an approval any more."
NOT_WAITING = "This turn is not waiting for an approval now."
ALREADY = "This call was already answered ({reason}); nothing waits for it any more."
GONE_ATTEMPT = (
    "That call belongs to attempt {given} of this turn, which has ended (its worker stopped, "
    "or its answer's continuation took over as a new attempt): its answer no longer counts. "
    "The turn is {status} now."
)
EARLIER_ATTEMPT = (
    "That call belongs to attempt {given} of this turn, which has ended; the turn now "
    "waits for call {call} of attempt {attempt}: answer that one."
)
OTHER_CALL = (
    "This turn waits for another call: {tool} (tool_call_id {id!r}, call {call} of attempt "
    "{attempt}). Answer that one."
)
AMBIGUOUS = (
    "Several calls of this turn had the tool_call_id {id!r}: say which one you answer with "
    "`call` and `attempt` (from the turn's pending_approval)."
)


def answers_of(metadata: object) -> dict[str, Any]:
    answers = metadata.get(APPROVALS_KEY) if isinstance(metadata, dict) else None
    return answers if isinstance(answers, dict) else {}


def clean_answer(
    tool_call_id: object, approved: object, call: object = None, attempt: object = None
) -> tuple[str, bool]:
    """An approval's body: `tool_call_id` a non-empty text, `approved` true or false, `call`
    and `attempt` (optional) positive whole numbers."""
    if not isinstance(tool_call_id, str) or not tool_call_id.strip():
        raise InvalidInput("tool_call_id must be the id of the tool call that waits (a text).")
    if len(tool_call_id) > MAX_CALL_ID:
        raise InvalidInput(f"tool_call_id is longer than {MAX_CALL_ID} characters.")
    if not isinstance(approved, bool):
        raise InvalidInput("approved must be true or false.")
    for name, value in (("call", call), ("attempt", attempt)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidInput(f"{name} must be a whole number (from the turn's pending_approval).")
        if isinstance(value, int) and value < 1:
            raise InvalidInput(f"{name} must be 1 or more (from the turn's pending_approval).")
    return tool_call_id, approved


def refusal(row: Turn, call_id: str, call: int | None, attempt: int | None) -> str:
    """Why an answer finds nothing to answer (the 409's detail)."""
    if not row.is_active:
        return ENDED.format(status=row.status)
    # An answered call: of this attempt, or of the one that paused and whose answer queued the
    # continuation running now (the continuation is a new attempt).
    recent = (row.attempts, row.attempts - 1) if attempt is None else (attempt,)
    for answer in answers_of(row.metadata).values():
        if (
            isinstance(answer, dict)
            and answer.get("attempt") in recent
            and answer.get("tool_call_id") == call_id
            and (call is None or answer.get("call") == call)
        ):
            return ALREADY.format(reason=answer.get("reason", "answered"))
    if attempt is not None and attempt < row.attempts:
        return GONE_ATTEMPT.format(given=attempt, status=row.status.replace("_", " "))
    return NOT_WAITING


def mismatch(
    row: Turn, pending: dict[str, Any], call_id: str, call: int | None, attempt: int | None
) -> str | None:
    """Why an answer does not name the call that waits (None: it does)."""
    if attempt is not None and attempt < int(pending.get("attempt") or 0):
        return EARLIER_ATTEMPT.format(
            given=attempt, call=pending.get("call"), attempt=pending.get("attempt")
        )
    other = attempt is not None and attempt != pending.get("attempt")
    if other or pending.get("tool_call_id") != call_id or call not in (None, pending.get("call")):
        return OTHER_CALL.format(
            tool=pending.get("tool_name"),
            id=pending.get("tool_call_id"),
            call=pending.get("call"),
            attempt=pending.get("attempt"),
        )
    # Without `call` or `attempt`, the answer is enough unless an answered call of this turn
    # fits it too: then it could be a late or repeated answer to that one.
    for answer in answers_of(row.metadata).values() if call is None or attempt is None else ():
        if (
            isinstance(answer, dict)
            and answer.get("tool_call_id") == call_id
            and call in (None, answer.get("call"))
            and attempt in (None, answer.get("attempt"))
        ):
            return AMBIGUOUS.format(id=call_id)
    return None
