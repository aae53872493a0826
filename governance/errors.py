"""The errors of governance (bases in `core.errors`)."""

from __future__ import annotations

from core.errors import DomainError


class GovernanceForbidden(DomainError):
    """The actor lacks the permission to act on users' conversations."""

    code = "forbidden"

    def __init__(self, message: str = "You may not view or restore users' conversations.") -> None:
        super().__init__(message)
