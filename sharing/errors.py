"""The errors of share links (bases in `core.errors`)."""

from __future__ import annotations

from core.errors import Conflict, InvalidInput, NotFound


class ShareNotFound(NotFound):
    def __init__(self, message: str = "Share link not found.") -> None:
        super().__init__(message)


class CheckpointNotInBranch(InvalidInput):
    def __init__(self) -> None:
        super().__init__(
            "This checkpoint is not a point of this branch's history: share the branch whole, "
            "or up to one of the checkpoints it shows."
        )


class ShareLimitReached(Conflict):
    def __init__(self, count: int, limit: int) -> None:
        super().__init__(
            f"You have {count:,} share link{'' if count == 1 else 's'}; the most one account may "
            f"keep is {limit:,}. Delete some you no longer need on your profile first."
        )
