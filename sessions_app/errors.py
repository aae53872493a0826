"""The errors of sessions, branches, messages and turns (bases in `core.errors`; a checkpoint's
own are in `checkpoints.errors`)."""

from __future__ import annotations

from core.errors import Conflict, InvalidInput, NotFound


class SessionNotFound(NotFound):
    def __init__(self, message: str = "Session not found.") -> None:
        super().__init__(message)


class BranchNotFound(NotFound):
    def __init__(self, message: str = "Branch not found.") -> None:
        super().__init__(message)


class RewindOutOfRange(InvalidInput):
    pass


class MessageNotFound(NotFound):
    def __init__(self, message: str = "Message not found.") -> None:
        super().__init__(message)


class TurnNotFound(NotFound):
    def __init__(self, message: str = "Turn not found.") -> None:
        super().__init__(message)


class TurnInProgress(Conflict):
    def __init__(
        self, message: str = "The agent is still answering in this session; wait for it to finish."
    ) -> None:
        super().__init__(message)


class IdempotencyKeyReused(Conflict):
    """An Idempotency-Key already used in this session for a request with another body."""

    def __init__(self, turn_id: int) -> None:
        super().__init__(
            f"This Idempotency-Key was already used in this session for another request "
            f"(turn {turn_id}); send a new key with a new message."
        )


class TurnAlreadyEnded(Conflict):
    def __init__(self, message: str = "This turn has already ended; it cannot be stopped.") -> None:
        super().__init__(message)


class MessageTooLong(InvalidInput):
    code = "too_large"


class ImportRejected(InvalidInput):
    """The document given to import is not a Rollback session export we can read."""


class ImportTooLarge(ImportRejected):
    code = "too_large"


class SessionLimitReached(Conflict):
    def __init__(self, count: int, limit: int) -> None:
        super().__init__(
            f"You have {count} session{'' if count == 1 else 's'}; "
            f"the most one account may keep is {limit}. "
            "Delete some you no longer need first."
        )


class InvalidSessionKey(InvalidInput):
    """A session key not of the form agent:<agentId>:<scope>:<chatId> (sessions_app.keys)."""


class NothingAwaitsApproval(Conflict):
    """An approval for a turn that is not waiting for one, or not for that tool call."""

    def __init__(
        self, message: str = "This turn is not waiting for an approval of that tool call."
    ) -> None:
        super().__init__(message)
