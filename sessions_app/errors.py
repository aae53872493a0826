"""Domain errors. Each names what went wrong in words a user can act on; the API and the HTML
views map them to HTTP status in one place each (by `code`)."""

from __future__ import annotations

# How the HTTP layers (the pages and the API) answer each kind of domain error.
HTTP_STATUS = {
    "not_found": 404,
    "invalid": 400,
    "forbidden": 403,
    "conflict": 409,
    "too_large": 413,
}


class DomainError(Exception):
    code = "invalid"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(DomainError):
    code = "not_found"


class SessionNotFound(NotFound):
    def __init__(self, message: str = "Session not found.") -> None:
        super().__init__(message)


class BranchNotFound(NotFound):
    def __init__(self, message: str = "Branch not found.") -> None:
        super().__init__(message)


class CheckpointNotFound(NotFound):
    def __init__(self, message: str = "Checkpoint not found.") -> None:
        super().__init__(message)


class InvalidInput(DomainError):
    code = "invalid"


class RewindOutOfRange(InvalidInput):
    pass


class Conflict(DomainError):
    code = "conflict"


class TurnNotFound(NotFound):
    def __init__(self, message: str = "Turn not found.") -> None:
        super().__init__(message)


class TurnInProgress(Conflict):
    def __init__(
        self, message: str = "The agent is still answering in this session; wait for it to finish."
    ) -> None:
        super().__init__(message)


class MessageTooLong(InvalidInput):
    code = "too_large"


class ImportRejected(InvalidInput):
    """The document given to import is not a Rollback session export we can read."""


class ImportTooLarge(ImportRejected):
    code = "too_large"
