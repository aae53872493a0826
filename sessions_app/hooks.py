"""What the conversation's operations need from the apps above it, declared here, registered there.

`sessions_app` sits below `workspace` and `checkpoints` (the layers: docs/architecture.md), yet
two of its operations touch their tables: a fork records how much of its parent's workspace it
sees (workspace's file versions), and a turn that loses its writes (failed, stopped, run again)
deletes them together with the checkpoints and branches that captured them
(checkpoints.captures); and the page's "New session" opens a blank session again only when
nothing of it is kept up there (no workspace file, no checkpoint); and a session that asks for a
checkpoint before each message gets it as the message is stored (checkpoints.each_message). The
owners register the functions in their AppConfig.ready()
(workspace.apps, checkpoints.apps); calling one that no app registered is a configuration error,
never a silent skip.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from .models import Branch, Session

ForkMark = Callable[["Branch", int], int]
TurnWritesDrop = Callable[[int], list[str]]
SessionHolds = Callable[[int], bool]
MessageCheckpoint = Callable[["Branch", str], None]
TurnAdmission = Callable[["Session"], None]


@dataclass
class _Registered:
    fork_mark: ForkMark | None = None
    turn_writes_drop: TurnWritesDrop | None = None
    session_holds: SessionHolds | None = None
    checkpoint_before_message: MessageCheckpoint | None = None
    turn_admission: TurnAdmission | None = None


_registered = _Registered()


def register_fork_mark(function: ForkMark) -> None:
    _registered.fork_mark = function


def register_turn_writes_drop(function: TurnWritesDrop) -> None:
    _registered.turn_writes_drop = function


def register_session_holds(function: SessionHolds) -> None:
    _registered.session_holds = function


def register_checkpoint_before_message(function: MessageCheckpoint) -> None:
    _registered.checkpoint_before_message = function


def register_turn_admission(function: TurnAdmission) -> None:
    _registered.turn_admission = function


def turn_admission(session: Session) -> None:
    """Refuse a turn of `session`'s owner that their budget does not allow (a DomainError:
    usage.selectors.budget_check)."""
    if _registered.turn_admission is None:
        raise ImproperlyConfigured("No turn_admission registered: is the usage app installed?")
    _registered.turn_admission(session)


def fork_mark(branch: Branch, position: int) -> int:
    """The workspace mark a branch forked from `branch` at message `position` sees
    (workspace.selectors.fork_mark)."""
    if _registered.fork_mark is None:
        raise ImproperlyConfigured("No fork_mark registered: is the workspace app installed?")
    return _registered.fork_mark(branch, position)


def turn_writes_drop(turn_id: int) -> list[str]:
    """Delete what a turn's agent wrote, with what captured it (checkpoints.captures). Returns
    the paths touched."""
    if _registered.turn_writes_drop is None:
        raise ImproperlyConfigured(
            "No turn_writes_drop registered: is the checkpoints app installed?"
        )
    return _registered.turn_writes_drop(turn_id)


def session_holds(session_id: int) -> bool:
    """Whether the apps above keep anything of the session: a workspace file (even one deleted
    since) or a checkpoint (checkpoints.selectors.session_holds)."""
    if _registered.session_holds is None:
        raise ImproperlyConfigured("No session_holds registered: is the checkpoints app installed?")
    return _registered.session_holds(session_id)


def checkpoint_before_message(branch: Branch, text: str) -> None:
    """Take the checkpoint a session asks for before each message its owner sends, at the
    branch's position before `text` is stored (checkpoints.each_message),
    under the session's lock that turn_start holds."""
    if _registered.checkpoint_before_message is None:
        raise ImproperlyConfigured(
            "No checkpoint_before_message registered: is the checkpoints app installed?"
        )
    _registered.checkpoint_before_message(branch, text)
