"""What a restore would bring back and what it cannot undo, in the words the user's restore
dialog and the admin's restore on a user's behalf both show (templates/checkpoints/
_restore_outcome.html)."""

from __future__ import annotations

from checkpoints.models import Checkpoint
from checkpoints.selectors import restore_outcome
from sessions_app.models import Session
from sessions_app.selectors import current_branch
from sharing.selectors import shares_a_rewind_cuts

# How many paths of each kind are named before "and N more".
FILES_SHOWN = 8


def restore_account(checkpoint: Checkpoint, session: Session) -> dict[str, object]:
    """What a restore of `checkpoint` would do (checkpoints.selectors.restore_outcome), against
    the session's current branch: the files of each kind, the external effects per mode (once
    when both modes leave the same), and the share links a rewind would shorten or delete."""
    outcome = restore_outcome(checkpoint, current=current_branch(session))
    change = outcome.files
    same = [m.pk for m in outcome.as_branch] == [m.pk for m in outcome.as_rewind]
    kinds = [
        ("brings back", "files-back", change.added),
        ("removes", "files-removed", change.removed),
        ("restores the earlier version of", "files-earlier", change.changed),
    ]
    return {
        "files": [
            {
                "verb": verb,
                "testid": testid,
                "paths": paths[:FILES_SHOWN],
                "more": max(0, len(paths) - FILES_SHOWN),
            }
            for verb, testid, paths in kinds
            if paths
        ],
        "irreversible_branch": outcome.as_branch,
        "irreversible_rewind": [] if same else outcome.as_rewind,
        "irreversible_same": same,
        # The live share links a rewind would show less of, or delete.
        "shares_cut": shares_a_rewind_cuts(checkpoint),
    }
