"""Domain errors of accounts. They subclass the project's errors (`sessions_app.errors`) so the
API and the HTML views map them to HTTP status in one place each (by `code`).

`field` names the input an error is about, so a form can show it beside that field.
"""

from __future__ import annotations

from sessions_app.errors import DomainError, InvalidInput, NotFound


class SignupClosed(DomainError):
    code = "forbidden"

    def __init__(
        self,
        message: str = "Sign-up is closed on this server; ask an administrator for an account.",
    ) -> None:
        super().__init__(message)


class InvalidUsername(InvalidInput):
    field = "username"


class UsernameTaken(InvalidUsername):
    def __init__(self, message: str = "A user with that username already exists.") -> None:
        super().__init__(message)


class InvalidEmail(InvalidInput):
    field = "email"


class WeakPassword(InvalidInput):
    """The password fails Django's password validators; `messages` holds each of their words."""

    field = "password"

    def __init__(self, messages: list[str]) -> None:
        super().__init__(" ".join(messages))
        self.messages = list(messages)


class InvalidPreference(InvalidInput):
    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class InvalidApiKeyName(InvalidInput):
    field = "name"


class ApiKeyLimitReached(InvalidInput):
    def __init__(self, limit: int) -> None:
        super().__init__(
            f"You already have {limit} active API keys, the most allowed; "
            "revoke one you no longer use first."
        )


class ApiKeyNotFound(NotFound):
    def __init__(self, message: str = "API key not found.") -> None:
        super().__init__(message)
