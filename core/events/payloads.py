"""The payloads of the events (one TypedDict per event type: the shapes of api-contract.md's
streaming events) and of the messages that go through the channel layer (an event for the sockets
to relay, or a control message they act on and never relay)."""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict

from core.validation import JSONObject

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


class ToolOutput(TypedDict):
    """What a running shell command printed since the last one (stdout and stderr, as read):
    shown live; its whole (bounded) output comes with its `tool.finished`."""

    type: Literal["tool.output"]
    session: int
    turn: int
    tool: str
    run: str  # one run's id: its pieces go together
    offset: int  # the characters of this run's output sent before this piece
    text: str


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
    | ToolOutput
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
# for the sockets themselves.
class EventMessage(TypedDict):
    type: Literal["rollback.event"]
    event: Event
    origin: NotRequired[str]  # the browser tab whose request made the change (core.origin)


# Why a socket's access ended: `signed_out` (logged out, key revoked, user deactivated, password
# changed) or `not_found` (the session is gone, or no longer theirs). The sockets close with the
# code of each (web/ws/codes.py), the code that refuses such a handshake.
Ended: TypeAlias = Literal["signed_out", "not_found"]


class CloseMessage(TypedDict):
    """The sockets of the group lose their access (core.events' `sockets_close_*`)."""

    type: Literal["rollback.close"]
    ended: Ended
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
