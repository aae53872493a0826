"""The events of a session, as `/ws/v1/sessions/{id}/` streams them (../shared/api-contract.md).

One function per event type, one payload shape each (`core.events.payloads`). The services call
them, never the adapters: a change made through a page, the API, an agent tool, the admin, a
command or a job sends the same events, once. Events about a change in the database are sent
after its transaction commits (`transaction.on_commit`), so a rolled-back change sends nothing;
the stream of a running reply (`message.delta`, `tool.started`, `tool.output`, `tool.finished`)
is sent as it happens. Who hears them, and how, is the bus's (`core.events.bus`).

Every event names its `session`. The package knows no model: it takes ids and values, so every
app can use it.

At its end are the control messages that close sockets whose access ended (logout, a revoked
key, a deactivated user, a deleted session): internal, never relayed to a client.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from django.db import transaction

from core.events.bus import (
    apikey_group,
    group_name,
    listen,
    listen_all,
    login_group,
    publish,
    send,
    send_many,
    user_group,
)
from core.events.payloads import (
    CloseMessage,
    Ended,
    Event,
    MessageDelta,
    PageMessage,
    SessionsMessage,
    ToolApprovalRequested,
    TurnCancelled,
    TurnFailed,
    TurnFinished,
)
from core.origin import current_tab
from core.validation import JSONObject

# The payloads and the bus's names that callers read through `core.events` (`events.Event`,
# `events.listen`); the rest are in core.events.payloads and core.events.bus.
__all__ = [
    "Event",
    "ToolApprovalRequested",
    "TurnCancelled",
    "TurnFailed",
    "TurnFinished",
    "group_name",
    "listen",
    "listen_all",
]


def _after_commit(event: Event) -> None:
    origin = current_tab()  # the tab acting now, not whoever runs the commit's callbacks
    transaction.on_commit(lambda: send(event, origin))


# --- turns -------------------------------------------------------------------------------------


def turn_started(*, session: int, turn: int, branch: int | None, attempt: int) -> None:
    """A worker began answering (`attempt` 2 and more: another worker took the turn over)."""
    _after_commit(
        {
            "type": "turn.started",
            "session": session,
            "turn": turn,
            "branch": branch,
            "attempt": attempt,
        }
    )


def message_delta(
    *, session: int, turn: int, delta: str, seq: int | None = None, attempt: int | None = None
) -> None:
    """One streamed piece of a turn's reply; `seq` numbers the pieces of the turn's `attempt`
    from 1 (see sessions_app.reply_stream, which stores each piece before it is sent), so a client
    skips those it has and reads a gap back from the store."""
    send(delta_event(session=session, turn=turn, delta=delta, seq=seq, attempt=attempt))


def message_deltas(deltas: Sequence[MessageDelta]) -> None:
    """Pieces of several replies at once (`delta_event`'s), as the reply streams' flusher
    sends those due together: one hand-off to the channel layer for them all."""
    send_many(deltas)


def delta_event(
    *, session: int, turn: int, delta: str, seq: int | None = None, attempt: int | None = None
) -> MessageDelta:
    """The `message.delta` event of one piece (`message_delta`)."""
    event: MessageDelta = {
        "type": "message.delta",
        "session": session,
        "turn": turn,
        "delta": delta,
    }
    if seq is not None:
        event["seq"] = seq
    if attempt is not None:
        event["attempt"] = attempt
    return event


def tool_started(*, session: int, turn: int, tool: str, args: object, call_id: str | None) -> None:
    send(
        {
            "type": "tool.started",
            "session": session,
            "turn": turn,
            "tool": tool,
            "args": args,
            "call_id": call_id,
        }
    )


def tool_output(*, session: int, turn: int, tool: str, run: str, offset: int, text: str) -> None:
    send(
        {
            "type": "tool.output",
            "session": session,
            "turn": turn,
            "tool": tool,
            "run": run,
            "offset": offset,
            "text": text,
        }
    )


def tool_finished(
    *, session: int, turn: int, tool: str, call_id: str | None, result: object, error: bool
) -> None:
    send(
        {
            "type": "tool.finished",
            "session": session,
            "turn": turn,
            "tool": tool,
            "call_id": call_id,
            "result": result,
            "error": error,
        }
    )


def turn_finished(
    *,
    session: int,
    turn: int,
    reply: str,
    tools_used: list[str],
    checkpoint: int | None,
    rolled_back_to: int | None,
    finish_reason: str | None,
) -> None:
    """The turn is done; `finish_reason` says how its reply ended (`stop`, `length`,
    `interrupted`, `tool_limit`)."""
    _after_commit(
        {
            "type": "turn.finished",
            "session": session,
            "turn": turn,
            "status": "done",
            "finish_reason": finish_reason,
            "reply": reply,
            "tools_used": tools_used,
            "checkpoint": checkpoint,
            "rolled_back_to": rolled_back_to,
        }
    )


def turn_failed(*, session: int, turn: int, error: str) -> None:
    _after_commit({"type": "turn.failed", "session": session, "turn": turn, "error": error})


def turn_cancelled(*, session: int, turn: int) -> None:
    _after_commit({"type": "turn.cancelled", "session": session, "turn": turn})


# --- checkpoints, branches, sessions ------------------------------------------------------------


def checkpoint_created(
    *, session: int, checkpoint: int, branch: int, name: str, is_auto: bool, message_count: int
) -> None:
    _after_commit(
        {
            "type": "checkpoint.created",
            "session": session,
            "checkpoint": checkpoint,
            "branch": branch,
            "name": name,
            "is_auto": is_auto,
            "message_count": message_count,
        }
    )


def checkpoints_deleted(*, session: int, checkpoints: Iterable[int]) -> None:
    """`checkpoint.deleted`, once per change, listing every checkpoint it deleted."""
    ids = sorted(checkpoints)
    if ids:
        _after_commit({"type": "checkpoint.deleted", "session": session, "checkpoints": ids})


def branch_changed(
    *,
    session: int,
    branch: int,
    checkpoint: int | None = None,
    deleted_checkpoints: Iterable[int] = (),
) -> None:
    """The session's current branch changed (switched, restored, rewound, forked by an edit or a
    regeneration, or by a rollback the agent made). `checkpoint`: the one restored, if any."""
    _after_commit(
        {
            "type": "branch.changed",
            "session": session,
            "branch": branch,
            "checkpoint": checkpoint,
            "deleted_checkpoints": sorted(deleted_checkpoints),
        }
    )


def session_changed(
    *, session: int, name: str, archived: bool, pinned: bool, metadata: JSONObject
) -> None:
    """Renamed, archived or restored, pinned or unpinned, or its metadata changed."""
    _after_commit(
        {
            "type": "session.changed",
            "session": session,
            "name": name,
            "archived": archived,
            "pinned": pinned,
            "metadata": metadata,
        }
    )


def sessions_changed(
    *, user: int, session: int, change: Literal["created", "changed", "deleted"]
) -> None:
    """The user's list of sessions changed: every chat page of theirs (whichever session it
    shows) lists its sessions again, once the change has committed."""
    message: SessionsMessage = {"type": "rollback.sessions", "session": session, "change": change}
    transaction.on_commit(lambda: publish(user_group(user), message, "a list change"))


def page_refresh(*, session: int) -> None:
    """Every chat page of the session fetches its refresh, once the change has committed (a
    control message for the pages' own sockets only: `/ws/v1/` relays nothing of it)."""
    message: PageMessage = {"type": "rollback.page", "session": session}
    origin = current_tab()
    if origin is not None:
        message["origin"] = origin
    transaction.on_commit(lambda: publish(group_name(session), message, "a page refresh"))


# --- approvals and the workspace ---------------------------------------------------------------


def tool_approval_requested(
    *,
    session: int,
    turn: int,
    tool_call_id: str,
    tool_name: str,
    args: object,
    call: int,
    attempt: int,
    note: str | None,
) -> None:
    """A turn waits at `awaiting_approval` for its owner to approve or refuse a tool call."""
    _after_commit(
        {
            "type": "tool.approval_requested",
            "session": session,
            "turn": turn,
            "tool_call_id": tool_call_id,
            "tool_name": tool_name,
            "args": args,
            "call": call,
            "attempt": attempt,
            "note": note,
        }
    )


def tool_approval_answered(
    *, session: int, turn: int, tool_call_id: str, approved: bool, reason: str
) -> None:
    _after_commit(
        {
            "type": "tool.approval_answered",
            "session": session,
            "turn": turn,
            "tool_call_id": tool_call_id,
            "approved": approved,
            "reason": reason,
        }
    )


def workspace_changed(*, session: int, branch: int, paths: Iterable[str]) -> None:
    _after_commit(
        {
            "type": "workspace.changed",
            "session": session,
            "branch": branch,
            "paths": sorted(set(paths)),
        }
    )


# --- closing sockets ----------------------------------------------------------------------------
# Control messages for the consumers, not events of the contract: they go to the channel layer
# only (never to the local listeners) with their own message type, which the consumers act on
# and never relay. Each closes the sockets of its group, in every web process, once the change
# that ends their access has committed; each socket also re-checks its access itself (see
# web/ws/consumers.py), so a lost message leaves a socket open only until its next check. The
# close codes are the sockets' (web/ws/codes.py): the message says why the access ended.


def _close_after_commit(group: str, ended: Ended) -> None:
    message: CloseMessage = {"type": "rollback.close", "ended": ended}
    transaction.on_commit(lambda: publish(group, message, "a close"))


def sockets_close_user(*, user: int) -> None:
    """The user can no longer sign in (deactivated): close all their sockets."""
    _close_after_commit(user_group(user), "signed_out")


def sockets_close_apikey(*, key: int) -> None:
    """The key is revoked: close the sockets opened with it."""
    _close_after_commit(apikey_group(key), "signed_out")


def sockets_close_logins(*, user: int, keep_session_key: str | None = None) -> None:
    """The user's password changed: every browser login of theirs ends with it, except the one
    that changed it (`keep_session_key`), which Django keeps signed in under a new key. Close the
    sockets of those logins, and have the kept login's sockets reconnect (they close with the
    code that says so). Sockets opened with an API key stay: a key is a credential of its own,
    revoked on its own."""
    keep = login_group(keep_session_key) if keep_session_key else ""
    message: CloseMessage = {
        "type": "rollback.close",
        "ended": "signed_out",
        "logins": True,
        "keep": keep,
    }
    transaction.on_commit(lambda: publish(user_group(user), message, "a close"))


def sockets_close_login(*, session_key: str) -> None:
    """The browser logged out: close the sockets that this login opened."""
    _close_after_commit(login_group(session_key), "signed_out")


def sockets_close_session(*, session: int) -> None:
    """The session is gone: close the sockets watching it."""
    _close_after_commit(group_name(session), "not_found")
