"""The Telegram bridge's domain errors: each says what went wrong in words the user can act on
(they are sent to the chat as they are, and the API maps them by `code`)."""

from __future__ import annotations

from core.errors import Conflict, DomainError, InvalidInput, NotFound


class BridgeOff(NotFound):
    def __init__(self, message: str = "The Telegram bridge is not enabled on this server.") -> None:
        super().__init__(message)


class LinkCodeUnknown(InvalidInput):
    def __init__(
        self,
        message: str = (
            "That link code is not known. Make a new one on your profile page "
            "(Link a Telegram chat) and send /start CODE."
        ),
    ) -> None:
        super().__init__(message)


class LinkCodeExpired(InvalidInput):
    def __init__(
        self,
        message: str = (
            "That link code has expired (codes are valid for ten minutes). Make a new one on "
            "your profile page and send /start CODE."
        ),
    ) -> None:
        super().__init__(message)


class LinkCodeUsed(Conflict):
    def __init__(
        self,
        message: str = (
            "That link code was already used (or replaced by a newer one). Make a new one on "
            "your profile page and send /start CODE."
        ),
    ) -> None:
        super().__init__(message)


class UserDeactivated(DomainError):
    code = "forbidden"

    def __init__(
        self, message: str = "This Rollback account is deactivated; it cannot use Telegram."
    ) -> None:
        super().__init__(message)


class ChatNotFound(NotFound):
    def __init__(self, message: str = "Linked Telegram chat not found.") -> None:
        super().__init__(message)


def _minutes(seconds: int) -> str:
    minutes = max(1, -(-seconds // 60))
    return "1 minute" if minutes == 1 else f"{minutes} minutes"


class LinkAttemptsLimited(DomainError):
    """Too many `/start CODE` from this chat or this Telegram user within the window.
    `retry_after`: seconds until it lifts; `first`: no earlier refusal of this window was
    answered (the bot says it once, then stays silent)."""

    code = "throttled"

    def __init__(self, *, retry_after: int, first: bool) -> None:
        super().__init__(
            f"Too many link attempts; try again in {_minutes(retry_after)}. A code works once "
            "and for ten minutes: make a new one on your profile page and send /start CODE."
        )
        self.retry_after = retry_after
        self.first = first
