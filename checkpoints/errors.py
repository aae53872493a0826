"""The errors of checkpoints (bases in `core.errors`; those of sessions, branches and turns, which
checkpoints raise too, are in `sessions_app.errors`)."""

from __future__ import annotations

from core.errors import NotFound


class CheckpointNotFound(NotFound):
    def __init__(self, message: str = "Checkpoint not found.") -> None:
        super().__init__(message)


class ImportJobNotFound(NotFound):
    def __init__(self, message: str = "Import not found.") -> None:
        super().__init__(message)
