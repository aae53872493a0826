"""Storing the agent's messages of a turn (`turn_store_messages`), only by the worker holding
the turn's current attempt, and only while its branch still ends with the turn's user
message; with them, in the same transaction, the effects ledger's entry of each external call
(`ledger_record`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NoReturn

from django.conf import settings
from django.db import transaction
from django.db.models import Exists

from core.validation import JSONObject, storable_json, storable_text

from ..models import LEDGER_TEXT_LIMIT, Branch, Effect, LedgerEntry, Message, Session, Turn
from ..services import lock_session_touched
from .attempts import owned
from .texts import bounded, bounded_calls, bounded_json


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


def turn_store_messages(
    *, turn: Turn, messages: list[NewMessage], savepoint: bool = True
) -> Branch:
    """Append the agent's messages after the turn's user message, in one transaction. Only the
    worker holding the turn's current attempt may; text the database cannot store is cleaned.
    The branch returned is the turn's (as its claim read it), its length moved past them.
    Inside the caller's transaction, `savepoint=False` spares the savepoint of a caller that
    undoes its whole transaction on any error (agents.turn.store)."""
    with transaction.atomic(savepoint=savepoint):
        return _store_messages(turn, messages)


def _store_messages(turn: Turn, messages: list[NewMessage]) -> Branch:
    if turn.branch_id is None:
        raise BranchMoved("The branch this turn was answering on has been deleted.")
    # The session's lock, taken by marking it updated (as the answer does).
    lock_session_touched(turn.session_id)
    # In one statement, under that lock: the branch still ends with the turn's user message,
    # the caller still holds the turn's attempt, and the branch's length moves past the new
    # messages. (turn_finish's conditional update, in the same transaction, is the fence a
    # take-over meets after this.)
    start = (turn.user_message_position or 0) + 1
    if not (
        Branch.objects.filter(pk=turn.branch_id, session_id=turn.session_id, message_count=start)
        .filter(Exists(owned(turn)))
        .update(message_count=start + len(messages))
    ):
        _refused(turn)
    branch = turn.branch  # as the claim read it (the worker's agent holds the same row)
    assert branch is not None  # noqa: S101 - the update above found it
    stored = insert_rows(branch, start, messages)
    branch.message_count = start + len(messages)
    ledger_record(
        session_id=turn.session_id,
        turn_id=turn.pk,
        owner_id=turn.session.owner_id,  # as the claim read it
        messages=stored,
    )
    # The turn's reply is its last assistant message: turn_finish records the reference.
    last = stored[-1] if stored and stored[-1].role == Message.Role.ASSISTANT else None
    turn.reply_message = last
    return branch


def _refused(turn: Turn) -> NoReturn:
    """Why the store's update matched nothing (read only then): the attempt is no longer the
    caller's, the branch was deleted, or it no longer ends with the turn's user message."""
    if not owned(turn).exists():
        raise TurnTakenOver(
            "This turn was given up on or handed to another worker before this answer "
            "arrived, so the answer was not added."
        )
    branches = Branch.objects.filter(session_id=turn.session_id)
    if turn.branch_id is None or not branches.filter(pk=turn.branch_id).exists():
        raise BranchMoved("The branch this turn was answering on has been deleted.")
    raise BranchMoved(
        "The conversation was rewound or changed while the agent was answering, "
        "so the reply was not added."
    )


def stored_rows(branch: Branch, start: int, messages: list[NewMessage]) -> list[Message]:
    """`messages` stored on `branch` from position `start` on, text the database cannot store
    cleaned; the branch's message count then ends after them. Under the session's lock."""
    stored = insert_rows(branch, start, messages)
    if messages:
        branch.message_count = start + len(messages)
        Branch.objects.filter(pk=branch.pk).update(message_count=branch.message_count)
    return stored


def insert_rows(branch: Branch, start: int, messages: list[NewMessage]) -> list[Message]:
    """`messages` inserted on `branch` from position `start` on, text the database cannot
    store cleaned (the branch's count is the caller's to move)."""
    limit = settings.AGENT_MAX_REPLY_CHARS
    return Message.objects.bulk_create(
        [
            Message(
                branch=branch,
                position=start + i,
                role=m.role,
                content=bounded(storable_text(m.content or ""), limit),
                tool_name=storable_text(m.tool_name or "")[:200],
                tool_args=storable_json(bounded_json(m.tool_args, limit)),
                tool_result=bounded(storable_text(m.tool_result or ""), limit),
                tool_call_id=storable_text(m.tool_call_id or "")[:200],
                tool_calls=storable_json(bounded_calls(m.tool_calls, limit)),
                effect=_effect(m),
                metadata=storable_json(m.metadata),
            )
            for i, m in enumerate(messages)
        ]
    )


def ledger_record(
    *, session_id: int, turn_id: int | None, owner_id: int, messages: list[Message]
) -> list[LedgerEntry]:
    """The ledger's entries (models.ledger) of the external calls among a turn's stored
    messages: `ran` for a call that answered without an error, `failed` for one marked with
    an error (agents.history.from_agno: it raised, or never ran: an unknown tool, arguments
    that failed validation, a call past the limit). A refused call is stored with effect
    `none` (agents.turn.store), so it has no entry. Called in the transaction that stores
    them. (An import records none from its messages: the document's own `effects` bring the
    ledger it had, checkpoints.transfer_ledger.)"""
    entries = [
        LedgerEntry(
            session_id=session_id,
            user_id=owner_id,
            branch_ref=m.branch_id,
            turn_ref=turn_id,
            message_ref=m.pk,
            position=m.position,
            tool_name=m.tool_name,
            tool_args=bounded_json(m.tool_args, LEDGER_TEXT_LIMIT),
            tool_result=bounded(m.tool_result, LEDGER_TEXT_LIMIT),
            status=_status(m),
            created_at=m.created_at,
        )
        for m in messages
        if m.role == Message.Role.TOOL and m.effect == Effect.EXTERNAL
    ]
    return LedgerEntry.objects.bulk_create(entries) if entries else []


@dataclass(frozen=True)
class UnstoredCall:
    """A tool call of a turn that ended without storing its messages (stopped, failed, taken
    over): what its stream saw of it."""

    tool_name: str
    args: Any
    result: str | None  # None: no answer came before the turn ended
    error: bool = False
    call_id: str = ""  # the model's id of the call (empty when the server sent none)


def ledger_record_unstored(*, turn: Turn, calls: list[UnstoredCall]) -> list[LedgerEntry]:
    """The ledger's entries for the external calls of a turn whose messages were never stored:
    their effects happened all the same (issue 36: a Stop, a failure or a take-over once left no
    trace of a call that created a directory on the host). `ran`, `failed`, or `may_have_run`
    for a call that never answered; placed right after the turn's user message, with no message
    of their own."""
    if not calls or turn.branch_id is None:
        return []
    owner_id = Session.objects.filter(pk=turn.session_id).values_list("owner_id", flat=True).first()
    if owner_id is None:  # the session is gone, and its ledger with it
        return []
    position = (turn.user_message_position or 0) + 1
    entries = [
        LedgerEntry(
            session_id=turn.session_id,
            user_id=owner_id,
            branch_ref=turn.branch_id,
            turn_ref=turn.pk,
            message_ref=None,
            position=position,
            tool_name=call.tool_name[:200],
            tool_args=bounded_json(call.args, LEDGER_TEXT_LIMIT),
            tool_result=bounded(storable_text(call.result or ""), LEDGER_TEXT_LIMIT),
            status=(
                LedgerEntry.Status.MAY_HAVE_RUN
                if call.result is None
                else LedgerEntry.Status.FAILED
                if call.error
                else LedgerEntry.Status.RAN
            ),
        )
        for call in calls
    ]
    return LedgerEntry.objects.bulk_create(entries)


def _status(m: Message) -> str:
    """`may_have_run` for a call given up on after it started (past its deadline:
    agents.tool_deadline), `failed` for one marked with an error, else `ran`."""
    meta = m.metadata if isinstance(m.metadata, dict) else {}
    if meta.get("may_have_run"):
        return LedgerEntry.Status.MAY_HAVE_RUN
    return LedgerEntry.Status.FAILED if meta.get("error") else LedgerEntry.Status.RAN
