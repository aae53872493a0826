"""Checkpoints: a named position in a branch, with a snapshot of the (small) session state.

The model is defined in `sessions_app.models`, next to the branches and turns that refer to it
(its app label is still `checkpoints`: same table, migrations, admin URLs and permissions), so the
two packages depend one way only: `checkpoints` (the operations on checkpoints) on `sessions_app`
(the rows of a conversation). The names stay importable from here.
"""

from __future__ import annotations

from sessions_app.models import Checkpoint, CheckpointQuerySet

__all__ = ["Checkpoint", "CheckpointQuerySet"]
