"""Reads of sessions, branches and messages: lookups and lists (`lookups.py`; every lookup of a
user's object starts from the user: another user's object is reported exactly like a missing
one), a branch's history read through its lineage (`lineage.py`), the rows it is built from
(`rows.py`)."""

from __future__ import annotations

from .lineage import (
    branch_history,
    branch_history_rows,
    branch_lineage,
    common_length,
    history_size,
    lineage_summary,
)
from .lookups import (
    SESSION_ORDERS,
    ConversationHit,
    active_turn,
    conversation_hits,
    current_branch,
    get_branch_for_user,
    get_session_for_user,
    get_turn_for_user,
    last_turn,
    latest_session_for_user,
    message_for_user,
    message_place,
    parse_pk,
    session_branches,
    session_branches_with_forks,
    session_ledger,
    session_ref_for_user,
    session_with_summary_for_user,
    sessions_for_user,
    sessions_idle,
    sessions_listed,
    sessions_sidebar,
    turn_reloaded,
    watch_access_many,
    with_branch_summary,
)
from .rows import HistoryRow, without_cyclic_gc

__all__ = [
    "SESSION_ORDERS",
    "ConversationHit",
    "HistoryRow",
    "active_turn",
    "branch_history",
    "branch_history_rows",
    "branch_lineage",
    "common_length",
    "conversation_hits",
    "current_branch",
    "get_branch_for_user",
    "get_session_for_user",
    "get_turn_for_user",
    "history_size",
    "last_turn",
    "latest_session_for_user",
    "lineage_summary",
    "message_for_user",
    "message_place",
    "parse_pk",
    "session_branches",
    "session_branches_with_forks",
    "session_ledger",
    "session_ref_for_user",
    "session_with_summary_for_user",
    "sessions_for_user",
    "sessions_idle",
    "sessions_listed",
    "sessions_sidebar",
    "turn_reloaded",
    "watch_access_many",
    "with_branch_summary",
    "without_cyclic_gc",
]
