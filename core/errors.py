"""The base of every domain error, and how the HTTP layers answer each kind.

Each error names what went wrong in words a user can act on. The domain apps subclass these
(`sessions_app.errors`, `accounts.errors`); the API (`core.api.exception_handler`) and the HTML
views (`core.http.domain_errors`) map them to HTTP status in one place each, by `code`.
"""

from __future__ import annotations

# How the HTTP layers (the pages and the API) answer each kind of domain error.
HTTP_STATUS = {
    "not_found": 404,
    "invalid": 400,
    "forbidden": 403,
    "conflict": 409,
    "too_large": 413,
    "throttled": 429,
}


class DomainError(Exception):
    code = "invalid"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(DomainError):
    code = "not_found"


class InvalidInput(DomainError):
    code = "invalid"


class Conflict(DomainError):
    code = "conflict"


class TooLarge(InvalidInput):
    """A value over one of the server's size limits (413)."""

    code = "too_large"
