"""Writes to sessions (`sessions.py`), branches (`branches.py`) and messages (`messages.py`),
each all-or-nothing, under the locks of `locks.py`."""

from __future__ import annotations

from ..models.session import DEFAULT_SESSION_NAME
from .branches import (
    branch_activate,
    branch_create,
    branch_fork,
    branch_make_current,
    branch_rename,
    branch_set_state,
)
from .feedback import message_feedback_clear, message_feedback_set
from .locks import lock_session, lock_session_touched
from .messages import message_append, message_append_locked, summary_store
from .sessions import (
    session_archive_if_idle,
    session_create,
    session_delete,
    session_for_key,
    session_new_or_blank,
    session_quota_check,
    session_settings_update,
    session_title_set,
    session_update,
)

__all__ = [
    "DEFAULT_SESSION_NAME",
    "branch_activate",
    "branch_create",
    "branch_fork",
    "branch_make_current",
    "branch_rename",
    "branch_set_state",
    "lock_session",
    "lock_session_touched",
    "message_append",
    "message_append_locked",
    "message_feedback_clear",
    "message_feedback_set",
    "session_archive_if_idle",
    "session_create",
    "session_delete",
    "session_for_key",
    "session_new_or_blank",
    "session_quota_check",
    "session_settings_update",
    "session_title_set",
    "session_update",
    "summary_store",
]
