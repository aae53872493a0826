"""The events of a session, as `/ws/v1/sessions/{id}/` streams them (../shared/api-contract.md).

One function per event type, one payload shape each. The services call them, never the adapters:
a change made through a page, the API, an agent tool, the admin, a command or a job sends the
same events, once. Events about a change in the database are sent after its transaction commits
(`transaction.on_commit`), so a rolled-back change sends nothing; the stream of a running reply
(`message.delta`, `tool.started`, `tool.finished`) is sent as it happens.

Every event names its `session`. The module knows no model: it takes ids and values, so every
app can use it.

At its end are the control messages that close sockets whose access ended (logout, a revoked
key, a deactivated user, a deleted session): internal, never relayed to a client.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction

from core import wake
from core.origin import current_tab
from core.validation import JSONObject

log = logging.getLogger(__name__)


# --- the payloads (api-contract.md, "Events"): one TypedDict per event type ---------------------


class TurnStarted(TypedDict):
    type: Literal["turn.started"]
    session: int
    turn: int
    branch: int | None
    attempt: int


class MessageDelta(TypedDict):
    type: Literal["message.delta"]
    session: int
    turn: int
    delta: str
    seq: NotRequired[int]
    attempt: NotRequired[int]


class ToolStarted(TypedDict):
    type: Literal["tool.started"]
    session: int
    turn: int
    tool: str
    args: object  # the arguments the model gave, as it gave them (JSON)
    call_id: str | None


class ToolFinished(TypedDict):
    type: Literal["tool.finished"]
    session: int
    turn: int
    tool: str
    call_id: str | None
    result: object  # what the tool returned (JSON)
    error: bool


class TurnFinished(TypedDict):
    type: Literal["turn.finished"]
    session: int
    turn: int
    status: Literal["done"]
    finish_reason: str | None
    reply: str
    tools_used: list[str]
    checkpoint: int | None
    rolled_back_to: int | None


class TurnFailed(TypedDict):
    type: Literal["turn.failed"]
    session: int
    turn: int
    error: str


class TurnCancelled(TypedDict):
    type: Literal["turn.cancelled"]
    session: int
    turn: int


class CheckpointCreated(TypedDict):
    type: Literal["checkpoint.created"]
    session: int
    checkpoint: int
    branch: int
    name: str
    is_auto: bool
    message_count: int


class CheckpointDeleted(TypedDict):
    type: Literal["checkpoint.deleted"]
    session: int
    checkpoints: list[int]


class BranchChanged(TypedDict):
    type: Literal["branch.changed"]
    session: int
    branch: int
    checkpoint: int | None
    deleted_checkpoints: list[int]


class SessionChanged(TypedDict):
    type: Literal["session.changed"]
    session: int
    name: str
    archived: bool
    pinned: bool
    metadata: JSONObject


class ToolApprovalRequested(TypedDict):
    type: Literal["tool.approval_requested"]
    session: int
    turn: int
    tool_call_id: str
    tool_name: str
    args: object  # the arguments the model gave (JSON)
    call: int  # the call's place among the calls of this attempt that waited (1, 2, ...)
    attempt: int  # the turn's attempt that asks: an answer names both (ids repeat)
    note: str | None  # said when the call may already have run (an earlier attempt approved it)


class ToolApprovalAnswered(TypedDict):
    """The owner answered (or the wait ended: cancelled, timed out); the turn goes on."""

    type: Literal["tool.approval_answered"]
    session: int
    turn: int
    tool_call_id: str
    approved: bool
    reason: str  # "approved", "refused", "timed_out", "cancelled"


class WorkspaceChanged(TypedDict):
    """Files of a branch changed (written, deleted, uploaded, imported; a turn's writes dropped
    with it). A restore or a rewind says so with `branch.changed` instead."""

    type: Literal["workspace.changed"]
    session: int
    branch: int
    paths: list[str]


# Every event names its type and its session; `event["type"] == ...` narrows to one payload.
Event: TypeAlias = (
    TurnStarted
    | MessageDelta
    | ToolStarted
    | ToolFinished
    | TurnFinished
    | TurnFailed
    | TurnCancelled
    | CheckpointCreated
    | CheckpointDeleted
    | BranchChanged
    | SessionChanged
    | ToolApprovalRequested
    | ToolApprovalAnswered
    | WorkspaceChanged
)


# What goes through the channel layer: an event for the sockets to relay, or a control message
# that closes sockets (the end of this module).
class EventMessage(TypedDict):
    type: Literal["rollback.event"]
    event: Event
    origin: NotRequired[str]  # the browser tab whose request made the change (core.origin)


class CloseMessage(TypedDict):
    type: Literal["rollback.close"]
    code: int
    logins: NotRequired[bool]  # close the user's browser logins only (not their API keys' sockets)
    keep: NotRequired[str]  # ... except this login's group, which reconnects


class SessionsMessage(TypedDict):
    """A user's list of sessions changed (one made, changed or deleted): the user's chat pages
    show their list again. Internal, like CloseMessage: never relayed to an integration."""

    type: Literal["rollback.sessions"]
    session: int
    change: Literal["created", "changed", "deleted"]


class PageMessage(TypedDict):
    """The chat pages of a session fetch their refresh (an administrator's notice dismissed in
    one tab goes from the others). Internal, like SessionsMessage: never relayed to an
    integration, and no event of the contract."""

    type: Literal["rollback.page"]
    session: int
    origin: NotRequired[str]  # the tab that made the change, whose answer showed it already


LayerMessage: TypeAlias = EventMessage | CloseMessage | SessionsMessage | PageMessage

# Local listeners (the terminal chat, the Python API's `on_event`) hear the events of the session
# they watch in this process, besides the channel layer.
_listeners: dict[int, list[Callable[[Event], None]]] = {}
_listeners_lock = threading.Lock()  # turns on other threads send while listeners come and go

# The in-memory channel layer lives on the web server's event loop. A turn running on a thread of
# the same process publishes onto that loop (the consumers note it when they connect); with Redis
# any thread or process can publish directly.
_server_loop: asyncio.AbstractEventLoop | None = None


def remember_server_loop() -> None:
    """Called from async code (a consumer's connect) on the server's loop."""
    global _server_loop
    _server_loop = asyncio.get_running_loop()


def _on_server_loop(layer: Any, group: str, message: LayerMessage) -> bool:
    loop = _server_loop
    if not isinstance(layer, InMemoryChannelLayer) or loop is None or loop.is_closed():
        return False
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        return False
    asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop).result(timeout=5)
    return True


def group_name(session_id: int) -> str:
    return f"rollback.session.{session_id}"


def listen(session_id: int, listener: Callable[[Event], None]) -> Callable[[], None]:
    """Call `listener` with each event of the session sent from this process; returns a
    function that stops it."""
    with _listeners_lock:
        _listeners.setdefault(session_id, []).append(listener)

    def stop() -> None:
        with _listeners_lock:
            listeners = _listeners.get(session_id, [])
            if listener in listeners:
                listeners.remove(listener)
            if not listeners:
                _listeners.pop(session_id, None)

    return stop


# Listeners of every session's events in this process (the Telegram relay): each is called on the
# thread that sends the event, so it must return at once (hand the work to a thread of its own).
_all_listeners: list[Callable[[Event], None]] = []


def listen_all(listener: Callable[[Event], None]) -> Callable[[], None]:
    """Call `listener` with each event of every session sent from this process, on the sending
    thread (it must be quick and must not block); returns a function that stops it."""
    with _listeners_lock:
        _all_listeners.append(listener)

    def stop() -> None:
        with _listeners_lock:
            if listener in _all_listeners:
                _all_listeners.remove(listener)

    return stop


def _send(event: Event, origin: str | None = None) -> None:
    """Send one event to everyone watching its session. Never fails the caller: the database
    has the truth, and a lost event must not lose the change. `origin`: the tab whose request
    made the change (core.origin), for its own socket."""
    session_id = event["session"]
    with _listeners_lock:
        listening = [*_listeners.get(session_id, ()), *_all_listeners]
    for listener in listening:
        try:
            listener(event)
        except Exception:
            log.exception("a listener failed on %s", event["type"])
    turn = event.get("turn")
    if isinstance(turn, int):
        wake.ring(event["type"], turn)  # the waits on the turn (core.wake)
    message: EventMessage = {"type": "rollback.event", "event": event}
    if origin is not None:
        message["origin"] = origin
    _publish(group_name(session_id), message, event["type"])


def _publish(group: str, message: LayerMessage, what: str) -> None:
    """Send one message to a channel group, in every process. Never fails the caller."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        if _on_server_loop(layer, group, message):
            return
        # Off the server's loop (no socket ever connected here, or Redis): on the one publishing
        # loop of the process, never a new thread or loop per event.
        _publisher_send(layer.group_send(group, message))
    except Exception:
        log.warning("could not publish %s to %s", what, group)


# Sync code (a worker's turn, a request) publishes to Redis through one event loop of its own
# per process, kept on a thread. async_to_sync made a new loop for each call, and with it a new
# Redis connection: ~4 ms a message against ~0.3 ms, measured; at 50 streamed tokens a second
# in 50 turns of a worker, the publishing alone took more than the machine had, and the
# channel layer dropped the tokens that waited too long.
_publisher: tuple[int, asyncio.AbstractEventLoop] | None = None
_publisher_lock = threading.Lock()


def _publisher_loop() -> asyncio.AbstractEventLoop:
    global _publisher
    with _publisher_lock:
        if _publisher is None or _publisher[0] != os.getpid() or _publisher[1].is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="rollback-events", daemon=True).start()
            _publisher = (os.getpid(), loop)
        return _publisher[1]


def _publisher_send(send: Coroutine[Any, Any, None]) -> None:
    """Run one send on the publishing loop and wait for it, so that one thread's events keep
    their order and a failure is seen here."""
    asyncio.run_coroutine_threadsafe(send, _publisher_loop()).result(timeout=10)


def _after_commit(event: Event) -> None:
    origin = current_tab()  # the tab acting now, not whoever runs the commit's callbacks
    transaction.on_commit(lambda: _send(event, origin))


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
    _send(event)


def tool_started(*, session: int, turn: int, tool: str, args: object, call_id: str | None) -> None:
    _send(
        {
            "type": "tool.started",
            "session": session,
            "turn": turn,
            "tool": tool,
            "args": args,
            "call_id": call_id,
        }
    )


def tool_finished(
    *, session: int, turn: int, tool: str, call_id: str | None, result: object, error: bool
) -> None:
    _send(
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
    transaction.on_commit(lambda: _publish(user_group(user), message, "a list change"))


def page_refresh(*, session: int) -> None:
    """Every chat page of the session fetches its refresh, once the change has committed (a
    control message for the pages' own sockets only: `/ws/v1/` relays nothing of it)."""
    message: PageMessage = {"type": "rollback.page", "session": session}
    origin = current_tab()
    if origin is not None:
        message["origin"] = origin
    transaction.on_commit(lambda: _publish(group_name(session), message, "a page refresh"))


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
# web/ws/consumers.py), so a lost message leaves a socket open only until its next check.

# Close codes of the sockets (/ws/chat/ and /ws/v1/), the same whether a handshake is refused or
# an open socket is closed.
CLOSE_SIGNED_OUT = 4401  # not signed in, or no longer: logged out, key revoked, user deactivated
CLOSE_NOT_FOUND = 4404  # no such session of yours, or no longer yours (deleted, given away)
# The login goes on under a new key (the password changed in this very login): reconnect, with
# the new cookie. (daphne sends 1000 or 3000-4999 only: the chat page's live.js reconnects after
# this code itself.)
CLOSE_RECONNECT = 4012


def user_group(user_id: int) -> str:
    """Every socket of the user joins it."""
    return f"rollback.user.{user_id}"


def apikey_group(key_id: int) -> str:
    """The sockets opened with that API key join it."""
    return f"rollback.apikey.{key_id}"


def login_group(session_key: str) -> str:
    """The sockets authenticated by that browser login (Django session) join it. The group is
    named by a hash of the session key, which is a secret."""
    return "rollback.login." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def _close_after_commit(group: str, code: int) -> None:
    message: CloseMessage = {"type": "rollback.close", "code": code}
    transaction.on_commit(lambda: _publish(group, message, "a close"))


def sockets_close_user(*, user: int) -> None:
    """The user can no longer sign in (deactivated): close all their sockets."""
    _close_after_commit(user_group(user), CLOSE_SIGNED_OUT)


def sockets_close_apikey(*, key: int) -> None:
    """The key is revoked: close the sockets opened with it."""
    _close_after_commit(apikey_group(key), CLOSE_SIGNED_OUT)


def sockets_close_logins(*, user: int, keep_session_key: str | None = None) -> None:
    """The user's password changed: every browser login of theirs ends with it, except the one
    that changed it (`keep_session_key`), which Django keeps signed in under a new key. Close the
    sockets of those logins, and have the kept login's sockets reconnect (CLOSE_RECONNECT).
    Sockets opened with an API key stay: a key is a credential of its own, revoked on its own."""
    keep = login_group(keep_session_key) if keep_session_key else ""
    message: CloseMessage = {
        "type": "rollback.close",
        "code": CLOSE_SIGNED_OUT,
        "logins": True,
        "keep": keep,
    }
    transaction.on_commit(lambda: _publish(user_group(user), message, "a close"))


def sockets_close_login(*, session_key: str) -> None:
    """The browser logged out: close the sockets that this login opened."""
    _close_after_commit(login_group(session_key), CLOSE_SIGNED_OUT)


def sockets_close_session(*, session: int) -> None:
    """The session is gone: close the sockets watching it."""
    _close_after_commit(group_name(session), CLOSE_NOT_FOUND)
