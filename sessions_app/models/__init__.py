"""Sessions, branches, messages, turns and summaries: the rows of a conversation, one module each.

Every message is stored once, in the branch that produced it. A branch made by a restore points at
its parent and a fork position: its history is the parent's history below that position followed
by its own messages, whose positions continue from the fork position. So forking and checkpointing
never copy a message, and a branch's history is read by one recursive query (see `history`).

The effects ledger (`LedgerEntry`) keeps every external call a turn stored, apart from the
history, so no rewind or deleted branch takes it away.

The checkpoints' rows live in `checkpoints.models`, the workspace's in `workspace.models`; the
models here refer to them by name ("checkpoints.Checkpoint"), so no import runs up the layers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .branch import Branch, BranchQuerySet, new_agno_session_id
from .ledger import LEDGER_TEXT_LIMIT, LedgerEntry
from .message import Effect, Message, MessageQuerySet, RatedMessage
from .session import Session, SessionQuerySet
from .summary import Summary
from .turn import Turn, TurnQuerySet

if TYPE_CHECKING:
    from .session import AnyUser as AnyUser

# The seeds' names (seed 003's Python API imports them): the same classes.
ExternalSession = Session  # seed name
InternalSession = Branch  # seed name

__all__ = [
    "LEDGER_TEXT_LIMIT",
    "Branch",
    "BranchQuerySet",
    "Effect",
    "ExternalSession",  # seed name
    "InternalSession",  # seed name
    "LedgerEntry",
    "Message",
    "MessageQuerySet",
    "RatedMessage",
    "Session",
    "SessionQuerySet",
    "Summary",
    "Turn",
    "TurnQuerySet",
    "new_agno_session_id",
]
