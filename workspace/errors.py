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
            "The workspace holds UTF-8 text files only; this content is binary (not UTF-8, or "
            "it holds NUL characters). Nothing was written."
        )


class FileTooLarge(TooLarge):
    pass


class TooManyFiles(TooLarge):
    pass
