"""Domain errors of accounts. They subclass the project's errors (`sessions_app.errors`) so the
API and the HTML views map them to HTTP status in one place each (by `code`).

`field` names the input an error is about, so a form can show it beside that field.
"""

from __future__ import annotations

from core.errors import DomainError, InvalidInput, NotFound


class SignupClosed(DomainError):
    code = "forbidden"

    def __init__(
        self,
        message: str = "Sign-up is closed on this server; ask an administrator for an account.",
    ) -> None:
        super().__init__(message)


def _minutes(seconds: int) -> str:
    minutes = max(1, -(-seconds // 60))
    return "1 minute" if minutes == 1 else f"{minutes} minutes"


class TooManyAttempts(DomainError):
    """A limit of attempts is reached; `retry_after` is how many seconds until it lifts."""

    code = "throttled"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LoginLocked(TooManyAttempts):
    def __init__(self, *, retry_after: int) -> None:
        super().__init__(
            f"Too many failed sign-in attempts; try again in {_minutes(retry_after)}.",
            retry_after=retry_after,
        )


class AccountNotApproved(DomainError):
    """The right password, for an account an administrator has not approved (or refused): the
    sign-in pages say so instead of signing in. Raised by the authentication backend, which
    `authenticate` lets through (as it does LoginLocked)."""

    code = "forbidden"
    PENDING = (
        "Your account is waiting for an administrator's approval. You can sign in once it is "
        "approved; nothing else is needed from you."
    )
    REFUSED = "An administrator refused this account. Ask them if you think this is a mistake."

    def __init__(self, *, refused: bool) -> None:
        super().__init__(self.REFUSED if refused else self.PENDING)
        self.refused = refused


class PasswordSignInOff(DomainError):
    """The right password, while LOCAL_LOGIN is off, of an account that is not the first
    administrator's."""

    code = "forbidden"

    def __init__(self) -> None:
        super().__init__(
            "Signing in with a password is turned off on this server, but for its first "
            "administrator."
        )


class SsoSignInFailed(DomainError):
    """A single sign-on that could not be completed: the provider unreachable or answering what
    it should not, a token refused, a sign-in started elsewhere (a wrong or spent state), or no
    account for this person while SSO sign-up is off. The message says which, in plain words."""

    code = "forbidden"


class SignupLimited(TooManyAttempts):
    def __init__(self, *, retry_after: int) -> None:
        super().__init__(
            f"Too many sign-ups from your network; try again in {_minutes(retry_after)}.",
            retry_after=retry_after,
        )


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


class AccountGone(NotFound):
    """The account was erased while a request of theirs was under way."""

    def __init__(self, message: str = "This account no longer exists.") -> None:
        super().__init__(message)


class ApiKeyNotFound(NotFound):
    def __init__(self, message: str = "API key not found.") -> None:
        super().__init__(message)
