"""Turns: one user message and the agent's answer to it.

`turn_start` stores the user's message before the model is ever called, so a failed turn loses
nothing the user wrote. The agent's messages are stored together when the run ends
(`turn_store_messages`); a run that fails stores none of them (`turn_fail`).

A worker claims a queued turn (`turn_claim`), which counts an attempt; the attempt number is its
fencing token: heartbeats, storing the answer and finishing all check it, so a worker that was
given up on can never store an answer after the turn was handed to another one
(`turn_recover_stale`). One reply is stored, once.

What the turn's agent wrote to the workspace goes with its tool messages: kept when the turn ends
`done` or is stopped (a stopped turn keeps the tool messages of its calls that ran: `stopped.py`),
deleted (checkpoints.captures.turn_writes_drop, called through sessions_app.hooks, with the
checkpoints and branches that captured them) in the same transaction when it fails or is claimed
again to run from its start. Those changes take the session's lock first,
like every writer of a session's rows, so an agent's write in flight is either dropped or refused.

The modules: `start.py` (start, continue, retry, claim), `agent_messages.py` (the agent's messages),
`ends.py` (finish, fail, cancel), `stopped.py` (what a stopped turn keeps: its calls' messages
and its reply, marked stopped), `recovery.py` (heartbeat, recovery from a
dead worker), `texts.py` (the limits on a turn's texts), `attempts.py` (the attempt a worker
holds, and ending a turn with its writes dropped).
"""

from __future__ import annotations

from .agent_messages import (
    BranchMoved,
    NewMessage,
    TurnTakenOver,
    UnstoredCall,
    ledger_record,
    ledger_record_unstored,
    turn_store_messages,
)
from .attempts import HELD
from .ends import turn_cancel, turn_fail, turn_finish
from .recovery import (
    NOT_PICKED_UP,
    WORKER_DIED,
    Recovery,
    turn_heartbeat,
    turn_recover_stale,
    turns_cancelled,
    turns_heartbeat,
)
from .start import (
    continued_reply,
    turn_admit,
    turn_claim,
    turn_continue,
    turn_model_of,
    turn_retry,
    turn_start,
)
from .stopped import stopped_calls, stopped_line, turn_keep_stopped
from .texts import (
    CUT_NOTE,
    CUT_OFF_REASONS,
    bounded,
    clean_user_message,
    cut_off,
    is_cut_off,
    message_limits_check,
    without_cut_note,
)

__all__ = [
    "CUT_NOTE",
    "CUT_OFF_REASONS",
    "HELD",
    "NOT_PICKED_UP",
    "WORKER_DIED",
    "BranchMoved",
    "NewMessage",
    "Recovery",
    "TurnTakenOver",
    "UnstoredCall",
    "bounded",
    "clean_user_message",
    "continued_reply",
    "cut_off",
    "is_cut_off",
    "ledger_record",
    "ledger_record_unstored",
    "message_limits_check",
    "stopped_calls",
    "stopped_line",
    "turn_admit",
    "turn_cancel",
    "turn_claim",
    "turn_continue",
    "turn_fail",
    "turn_finish",
    "turn_heartbeat",
    "turn_keep_stopped",
    "turn_model_of",
    "turn_recover_stale",
    "turn_retry",
    "turn_start",
    "turn_store_messages",
    "turns_cancelled",
    "turns_heartbeat",
    "without_cut_note",
]
