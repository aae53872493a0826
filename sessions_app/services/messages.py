"""Writes to a branch's messages: append one at its end, and keep the model's summary of a
prefix of its history."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from core.errors import InvalidInput
from core.validation import JSONObject, clean_metadata, storable_text

from ..models import Branch, Message, Summary
from ..selectors import branch_history
from .locks import lock_branch, lock_session_touched


@transaction.atomic
def message_append(
    *,
    branch: Branch,
    role: str,
    content: str = "",
    tool_name: str = "",
    tool_args: Any = None,
    tool_result: str = "",
    tool_call_id: str = "",
    tool_calls: Any = None,
    metadata: JSONObject | None = None,
) -> Message:
    """Append one message at the end of the branch's history (under the session's lock, like
    every structural change of a branch)."""
    if role not in Message.Role.values:
        raise InvalidInput(f"Unknown message role {role!r}.")
    if not isinstance(content, str):
        raise InvalidInput("Message content must be text.")
    lock_session_touched(branch.session_id)
    return message_append_locked(
        branch=branch,
        locked=lock_branch(branch.pk),
        role=role,
        content=content,
        tool_name=tool_name,
        tool_args=tool_args,
        tool_result=tool_result,
        tool_call_id=tool_call_id,
        tool_calls=tool_calls,
        metadata=metadata,
    )


def message_append_locked(
    *,
    branch: Branch,
    locked: Branch,
    role: str,
    content: str = "",
    tool_name: str = "",
    tool_args: Any = None,
    tool_result: str = "",
    tool_call_id: str = "",
    tool_calls: Any = None,
    metadata: JSONObject | None = None,
) -> Message:
    """`message_append` for a caller already inside a transaction holding the session's lock as
    `lock_session_touched` takes it (the session marked updated), with `locked`, the branch's
    row as read under that lock (turn_start): no second lock, no second read of the branch."""
    message = Message.objects.create(
        branch_id=locked.pk,
        position=locked.message_count,
        role=role,
        content=storable_text(content),
        tool_name=tool_name or "",
        tool_args=tool_args,
        tool_result=tool_result or "",
        tool_call_id=tool_call_id or "",
        tool_calls=tool_calls,
        metadata=clean_metadata(metadata, what="message metadata"),
    )
    Branch.objects.filter(pk=locked.pk).update(message_count=F("message_count") + 1)
    branch.message_count = locked.message_count = locked.message_count + 1
    return message


def summary_store(
    *,
    branch: Branch,
    end: int,
    content: str,
    model: str,
    metadata: JSONObject | None = None,
) -> Summary:
    """Keep the model's summary of the branch's history below position `end`, keyed by the
    message at `end - 1` so every branch sharing that prefix finds it. A summary of the same
    prefix written meanwhile by another worker is kept and returned instead."""
    last = branch_history(branch, start=end - 1, end=end)
    if not last:
        raise InvalidInput("There is nothing to summarise below that position.")
    existing = Summary.objects.filter(last_message_id=last[0].pk).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return Summary.objects.create(
                last_message_id=last[0].pk,
                end_position=end,
                content=storable_text(content),
                model=model[:200],
                metadata=metadata or {},
            )
    except IntegrityError:
        return Summary.objects.get(last_message_id=last[0].pk)
