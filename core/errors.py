"""The base of every domain error, and how the HTTP layers answer each kind.

Each error names what went wrong in words a user can act on. The domain apps subclass these
(`sessions_app.errors`, `accounts.errors`); the API (`core.api.exception_handler`) and the HTML
views (`core.http.domain_errors`) map them to HTTP status in one place each, by `code`.
"""

from __future__ import annotations

import re

# How the HTTP layers (the pages and the API) answer each kind of domain error.
HTTP_STATUS = {
    "not_found": 404,
    "invalid": 400,
    "forbidden": 403,
    "conflict": 409,
    "too_large": 413,
    "throttled": 429,
}


_SURROGATE = re.compile("[\ud800-\udfff]")


def renderable(text: str) -> str:
    """`text` with each lone surrogate (U+D800 to U+DFFF, which no UTF-8 answer can hold) written
    as its escape, `\\ud800`: an error that quotes what a user sent can always be shown."""
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


# A name from the code in parentheses: a setting (" (WORKSPACE_MAX_FILE_BYTES)") or a stored
# field (" (settings.instructions)"). It helps an integrator or an operator; a person on a page
# cannot act on it.
_INTERNAL_NAME = re.compile(r" \((?:settings\.[a-z_]+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\)")


class DomainError(Exception):
    code = "invalid"

    def __init__(self, message: str) -> None:
        message = renderable(message)
        super().__init__(message)
        self.message = message

    @property
    def people(self) -> str:
        """The message as the pages show it: without the internal names the API's keeps."""
        return _INTERNAL_NAME.sub("", self.message)


class NotFound(DomainError):
    code = "not_found"


class InvalidInput(DomainError):
    code = "invalid"


class Conflict(DomainError):
    code = "conflict"


class TooLarge(InvalidInput):
    """A value over one of the server's size limits (413)."""

    code = "too_large"
