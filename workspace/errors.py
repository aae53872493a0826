"""The workspace's errors (bases in core.errors): each says what to do instead."""

from __future__ import annotations

from core.errors import InvalidInput, NotFound, TooLarge


class FileNotFoundInWorkspace(NotFound):
    def __init__(self, path: str = "") -> None:
        shown = f" '{path}'" if path else ""
        super().__init__(f"No file{shown} in this workspace.")


class BadPath(InvalidInput):
    pass


class BinaryContent(InvalidInput):
    def __init__(self) -> None:
        super().__init__(
            "This needs text (UTF-8, without NUL characters); the content is binary. Nothing "
            "was written."
        )


class BinaryFile(InvalidInput):
    """A text read of a binary file (an image, a PDF): its bytes are there, but not as text."""

    def __init__(self, path: str, size: int) -> None:
        super().__init__(
            f"'{path}' is a binary file ({size:,} bytes), not text: it can be downloaded, or "
            "used by a command, but not read as text."
        )


class FileTooLarge(TooLarge):
    pass


class TooManyFiles(TooLarge):
    pass
