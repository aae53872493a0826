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
    history_effects,
    history_size,
    lineage_summary,
)
from .lookups import (
    SESSION_ORDERS,
    ConversationHit,
    conversation_hits,
    current_branch,
    get_branch_for_user,
    get_session_for_user,
    get_turn_for_user,
    parse_pk,
    session_branches,
    sessions_for_user,
    sessions_idle,
    sessions_listed,
    sessions_sidebar,
    watch_access,
    with_branch_summary,
)
from .rows import HistoryRow, without_cyclic_gc

__all__ = [
    "SESSION_ORDERS",
    "ConversationHit",
    "HistoryRow",
    "branch_history",
    "branch_history_rows",
    "branch_lineage",
    "common_length",
    "conversation_hits",
    "current_branch",
    "get_branch_for_user",
    "get_session_for_user",
    "get_turn_for_user",
    "history_effects",
    "history_size",
    "lineage_summary",
    "parse_pk",
    "session_branches",
    "sessions_for_user",
    "sessions_idle",
    "sessions_listed",
    "sessions_sidebar",
    "watch_access",
    "with_branch_summary",
    "without_cyclic_gc",
]
