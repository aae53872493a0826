"""Why a door refuses what a user's groups do not give them."""

from __future__ import annotations

from core.errors import DomainError, InvalidInput


class ModelNotAllowed(InvalidInput):
    """A model the user's groups do not give them (400: the request asked for it)."""

    def __init__(self, model: str, allowed: list[str]) -> None:
        shown = model[:200]
        if allowed:
            super().__init__(
                f"Your access does not include the model {shown!r}; you may use: "
                f"{', '.join(allowed)}."
            )
        else:
            super().__init__(
                f"Your access does not include the model {shown!r}, nor any other: ask an "
                "administrator to give one of your groups a model."
            )


class AccessDenied(DomainError):
    """Something the user's groups do not let them do (403)."""

    code = "forbidden"


def sharing_denied() -> AccessDenied:
    return AccessDenied(
        "Your access does not include sharing links: ask an administrator if you need it."
    )


def api_denied() -> AccessDenied:
    return AccessDenied(
        "Your access does not include the API: ask an administrator if you need it."
    )
