"""What the workspace needs from the app above it, declared here, registered there.

Coalescing (workspace.coalescing) must know whether a checkpoint shows a version, but the
checkpoints' table belongs to `checkpoints`, one layer up (docs/architecture.md). checkpoints.apps
registers the check in its AppConfig.ready(); calling it unregistered is a configuration error,
never a silent "no".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

# (branch_id, version_id) -> whether a checkpoint of the branch shows that version or a later one.
CheckpointHolds = Callable[[int, int], bool]


@dataclass
class _Registered:
    checkpoint_holds: CheckpointHolds | None = None


_registered = _Registered()


def register_checkpoint_holds(function: CheckpointHolds) -> None:
    _registered.checkpoint_holds = function


def checkpoint_holds(*, branch_id: int, version_id: int) -> bool:
    """Whether a checkpoint of `branch_id` shows the version `version_id` (its `files_mark`
    reaches it)."""
    if _registered.checkpoint_holds is None:
        raise ImproperlyConfigured("No checkpoint_holds registered: is checkpoints installed?")
    return _registered.checkpoint_holds(branch_id, version_id)
