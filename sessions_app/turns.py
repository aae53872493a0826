"""Turns: one user message and the agent's answer to it.

`turn_start` stores the user's message before the model is ever called, so a failed turn loses
nothing the user wrote. The agent's messages are stored together when the run ends
(`turn_complete`); a run that fails stores none of them (`turn_fail`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from .errors import BranchNotFound, InvalidInput, MessageTooLong, TurnInProgress
from .models import ExternalSession, InternalSession, Message, Turn
from .services import lock_session, message_append


def clean_user_message(message: Any) -> str:
    if not isinstance(message, str):
        raise InvalidInput("The message must be text.")
    message = message.replace("\x00", "")
    if not message.strip():
        raise InvalidInput("The message is empty.")
    limit = settings.AGENT_MAX_INPUT_CHARS
    if len(message) > limit:
        raise MessageTooLong(
            f"The message is {len(message)} characters long; the limit is {limit}."
        )
    return message


def turn_start(
    *,
    session: ExternalSession,
    message: Any,
    branch: InternalSession | None = None,
    idempotency_key: str = "",
) -> Turn:
    """Queue a turn on the session's current branch (or on `branch`) and store the user's
    message. Empty or oversized messages are refused before anything is written."""
    text = clean_user_message(message)
    try:
        with transaction.atomic():
            lock_session(session.pk)
            turn_expire_stale(session=session)
            if Turn.objects.filter(session=session).active().exists():
                raise TurnInProgress()
            if branch is None:
                branch = InternalSession.objects.get(session=session, is_current=True)
            elif branch.session_id != session.pk:
                raise BranchNotFound()
            stored = message_append(branch=branch, role=Message.Role.USER, content=text)
            return Turn.objects.create(
                session=session,
                branch=branch,
                message=text,
                user_message_position=stored.position,
                metadata={"user_message_id": stored.pk},
                idempotency_key=idempotency_key,
            )
    except IntegrityError:
        # Two requests raced past the check; the partial unique index stopped the second.
        raise TurnInProgress() from None


def turn_retry(*, turn: Turn) -> Turn:
    """Try a failed turn again. When its message is still the last of its branch, a new turn
    answers that same message (it is not stored twice); otherwise the message is sent again on
    the current branch."""
    if turn.status != Turn.Status.FAILED:
        raise InvalidInput("Only a failed turn can be retried.")
    with transaction.atomic():
        lock_session(turn.session_id)
        turn_expire_stale(session=turn.session)
        if Turn.objects.filter(session_id=turn.session_id).active().exists():
            raise TurnInProgress()
        branch = InternalSession.objects.filter(pk=turn.branch_id, is_current=True).first()
        position = turn.user_message_position
        if branch is None or position is None or branch.message_count != position + 1:
            return turn_start(session=turn.session, message=turn.message)
        return Turn.objects.create(
            session_id=turn.session_id,
            branch=branch,
            message=turn.message,
            user_message_position=position,
            metadata={"retry_of": turn.pk},
        )


def turn_claim(*, turn_id: int) -> bool:
    """Move a queued turn to running. False when it is not queued (say, a redelivered task)."""
    now = timezone.now()
    return (
        Turn.objects.filter(pk=turn_id, status=Turn.Status.QUEUED).update(
            status=Turn.Status.RUNNING, started_at=now, heartbeat_at=now
        )
        == 1
    )


def turn_heartbeat(*, turn_id: int) -> None:
    Turn.objects.filter(pk=turn_id, status=Turn.Status.RUNNING).update(heartbeat_at=timezone.now())


WORKER_DIED = (
    "The worker answering this turn stopped (no sign of life for {seconds} s). "
    "Your message is kept; send it again."
)
NOT_PICKED_UP = (
    "No worker picked this turn up within {seconds} s (is a Celery worker running?). "
    "Your message is kept; send it again."
)


def turn_expire_stale(*, session: ExternalSession | None = None) -> int:
    """Fail turns whose worker died, or that no worker picked up, so a session is never blocked
    for good. Returns how many were failed."""
    now = timezone.now()
    stale = settings.AGENT_TURN_STALE_SECONDS
    queued = settings.TURN_QUEUE_TIMEOUT
    turns = Turn.objects.all() if session is None else Turn.objects.filter(session=session)
    died = turns.filter(status=Turn.Status.RUNNING).filter(
        Q(heartbeat_at__lt=now - timedelta(seconds=stale))
        | Q(heartbeat_at__isnull=True, started_at__lt=now - timedelta(seconds=stale))
    )
    lost = turns.filter(status=Turn.Status.QUEUED, created_at__lt=now - timedelta(seconds=queued))
    count = died.update(
        status=Turn.Status.FAILED, error=WORKER_DIED.format(seconds=stale), finished_at=now
    )
    count += lost.update(
        status=Turn.Status.FAILED, error=NOT_PICKED_UP.format(seconds=queued), finished_at=now
    )
    return count


@dataclass
class NewMessage:
    role: str
    content: str = ""
    tool_name: str = ""
    tool_args: Any = None
    tool_result: str = ""
    tool_call_id: str = ""
    tool_calls: Any = None
    metadata: dict = field(default_factory=dict)


class BranchMoved(Exception):
    """The turn's branch no longer ends with the turn's user message."""


@transaction.atomic
def turn_store_messages(*, turn: Turn, messages: list[NewMessage]) -> InternalSession:
    """Append the agent's messages after the turn's user message, in one transaction."""
    if turn.branch_id is None:
        raise BranchMoved("The branch this turn was answering on has been deleted.")
    lock_session(turn.session_id)
    if not Turn.objects.filter(pk=turn.pk, status=Turn.Status.RUNNING).exists():
        raise BranchMoved(
            "This turn was given up on (it took too long) before the answer arrived, "
            "so the answer was not added."
        )
    try:
        branch = InternalSession.objects.select_for_update().get(pk=turn.branch_id)
    except InternalSession.DoesNotExist:
        raise BranchMoved("The branch this turn was answering on has been deleted.") from None
    if branch.message_count != (turn.user_message_position or 0) + 1:
        raise BranchMoved(
            "The conversation was rewound or changed while the agent was answering, "
            "so the reply was not added."
        )
    start = branch.message_count
    Message.objects.bulk_create(
        [
            Message(
                branch=branch,
                position=start + i,
                role=m.role,
                content=(m.content or "").replace("\x00", ""),
                tool_name=m.tool_name or "",
                tool_args=m.tool_args,
                tool_result=(m.tool_result or "").replace("\x00", ""),
                tool_call_id=m.tool_call_id or "",
                tool_calls=m.tool_calls,
                metadata=m.metadata,
            )
            for i, m in enumerate(messages)
        ]
    )
    branch.message_count = start + len(messages)
    InternalSession.objects.filter(pk=branch.pk).update(message_count=branch.message_count)
    ExternalSession.objects.filter(pk=turn.session_id).update(updated_at=timezone.now())
    return branch


def turn_finish(
    *,
    turn: Turn,
    reply: str,
    tools_used: list[str],
    checkpoint=None,
    rolled_back_to=None,
    metadata: dict | None = None,
) -> Turn:
    """Mark a running turn done (a turn expired meanwhile stays failed)."""
    Turn.objects.filter(pk=turn.pk, status=Turn.Status.RUNNING).update(
        status=Turn.Status.DONE,
        reply=reply,
        tools_used=tools_used,
        checkpoint=checkpoint,
        rolled_back_to=rolled_back_to,
        finished_at=timezone.now(),
        metadata={**turn.metadata, **(metadata or {})},
    )
    turn.refresh_from_db()
    return turn


def turn_fail(*, turn: Turn, error: str, metadata: dict | None = None) -> Turn:
    """Mark the turn failed with a readable error. What was stored stays stored."""
    Turn.objects.filter(pk=turn.pk, status__in=Turn.ACTIVE).update(
        status=Turn.Status.FAILED,
        error=error[:4000],
        finished_at=timezone.now(),
        metadata={**turn.metadata, **(metadata or {})},
    )
    turn.refresh_from_db()
    return turn
