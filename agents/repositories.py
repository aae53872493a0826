"""Seed 003's repositories, over this app's database.

Seed 003 passes `checkpoint_repo` and `internal_session_repo` to `RollbackAgent` and
`RollbackAgent.from_checkpoint`, and reads checkpoints with `CheckpointRepository().find_all()`.
Here the storage is always the Django database, written through the services (checkpoints,
branches and their locks): these repositories are the seed's read side of it, and the defaults an
agent holds as `agent.checkpoint_repo` and `agent.internal_session_repo`. With `user`, they see
only that user's objects; without, everyone's (a Django shell, as in the seed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from checkpoints.models import Checkpoint
from sessions_app.models import Branch

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from accounts.models import User


class CheckpointRepository:
    def __init__(self, user: User | None = None) -> None:
        self.user = user

    def _all(self) -> QuerySet[Checkpoint]:
        qs = Checkpoint.objects.all()
        if self.user is not None:
            qs = qs.for_user(self.user)
        return qs.order_by("-created_at", "-id")

    def get_by_id(self, checkpoint_id: int) -> Checkpoint | None:
        try:
            return self._all().get(pk=int(checkpoint_id))
        except (Checkpoint.DoesNotExist, ValueError, TypeError, OverflowError):
            return None

    def find_all(self) -> list[Checkpoint]:
        """Every checkpoint, newest first."""
        return list(self._all())

    def find_by_internal_session(self, internal_session_id: int) -> list[Checkpoint]:
        """The checkpoints of one branch, newest first."""
        return list(self._all().filter(branch_id=internal_session_id))


class InternalSessionRepository:
    def __init__(self, user: User | None = None) -> None:
        self.user = user

    def _all(self) -> QuerySet[Branch]:
        qs = Branch.objects.all()
        if self.user is not None:
            qs = qs.for_user(self.user)
        return qs.order_by("created_at", "id")

    def get_by_id(self, internal_session_id: int) -> Branch | None:
        try:
            return self._all().get(pk=int(internal_session_id))
        except (Branch.DoesNotExist, ValueError, TypeError, OverflowError):
            return None

    def find_all(self) -> list[Branch]:
        """Every branch, oldest first."""
        return list(self._all())

    def find_by_external_session(self, external_session_id: int) -> list[Branch]:
        """The branches of one session, oldest first."""
        return list(self._all().filter(session_id=external_session_id))
