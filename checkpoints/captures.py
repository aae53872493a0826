"""What holds a branch's file versions, and dropping it with them.

A checkpoint shows its branch's versions up to its `files_mark`; a forked branch shows its
parent's up to its `fork_file_mark` (none recorded: all of them), and its descendants read
through it. So whatever deletes a branch's versions from some id on changes what every
checkpoint and fork whose mark reaches that id shows. Two deleters: a rewind
(checkpoints.rewinds, which also cuts messages) and a turn that loses its writes
(sessions_app.turns: it failed, was stopped or runs again; it calls `turn_writes_drop` through
sessions_app.hooks, which checkpoints.apps registers, since sessions_app may not import it).
Neither lets a kept checkpoint or branch change: what captured a deleted version goes with it.

Version ids only grow, so "captured a deleted version" is one comparison against the smallest
deleted id, and each read is one index lookup or range: the cost does not grow with the history.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from django.db.models import Min

from core import events
from sessions_app.models import Branch, Message
from workspace.file_rows import turn_versions_delete, versions_delete
from workspace.models import FileVersion

from .models import Checkpoint

# Past any version id: a bound no mark reaches (a BIGINT on both databases).
NO_VERSION = 2**62


def branches_forked_after(
    branch_id: int, position: int | None, *, first_version: int | None = None
) -> list[int]:
    """Branches forked from `branch_id` that inherit any of its messages at or after `position`
    (None: no message), or any of its file versions from `first_version` on, with all their
    descendants: the branches a deletion of those would leave without their history."""
    q = connection.ops.quote_name
    table = q(Branch._meta.db_table)
    params: list[int] = [branch_id]
    captured: list[str] = []
    if position is not None:
        captured.append("fork_position > %s")
        params.append(position)
    if first_version is not None:
        captured.append("COALESCE(fork_file_mark, %s) >= %s")
        params += [NO_VERSION, first_version]
    if not captured:
        return []
    sql = f"""
        WITH RECURSIVE doomed(id) AS (
            SELECT id FROM {table} WHERE parent_id = %s AND ({" OR ".join(captured)})
            UNION ALL
            SELECT c.id FROM {table} c JOIN doomed d ON c.parent_id = d.id
        )
        SELECT id FROM doomed
    """  # noqa: S608 - quoted names and constants; values are parameters
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def branches_drop(branch_ids: Iterable[int]) -> None:
    """Delete whole branches (a set closed under descendants): their messages, file versions,
    checkpoints and rows. Call under the session's lock."""
    ids = list(branch_ids)
    if not ids:
        return
    # Children first, so the deletion never walks a deep chain of parents.
    Message.objects.filter(branch_id__in=ids).delete()
    versions_delete(FileVersion.objects.filter(branch_id__in=ids))
    Checkpoint.objects.filter(branch_id__in=ids).delete()
    Branch.objects.filter(pk__in=ids).delete()


def turn_writes_drop(turn_id: int) -> list[str]:
    """Delete what a turn's agent wrote to the workspace, and every checkpoint and forked branch
    that captured any of it (an agent's checkpoint taken during the turn, a restore from one),
    announcing them. Called, under the session's lock and in the transaction that ends or
    restarts the turn, whenever the turn's tool messages are not kept: it failed or runs again
    from its start (a stopped turn keeps them, and its writes). Returns the paths touched."""
    firsts = (
        FileVersion.objects.filter(turn_id=turn_id)
        .order_by()
        .values("branch_id", "branch__session_id")
        .annotate(first=Min("id"))
    )
    for row in firsts:
        _captured_drop(row["branch__session_id"], row["branch_id"], row["first"])
    return turn_versions_delete(turn_id)


def _captured_drop(session_id: int, branch_id: int, first_version: int) -> None:
    """Delete the checkpoints of `branch_id` and the branches forked from it that show any of
    its versions from `first_version` on, about to be deleted."""
    own = Checkpoint.objects.filter(branch_id=branch_id, files_mark__gte=first_version)
    doomed = branches_forked_after(branch_id, None, first_version=first_version)
    gone = list(own.values_list("id", flat=True))
    gone += Checkpoint.objects.filter(branch_id__in=doomed).values_list("id", flat=True)
    if not gone and not doomed:
        return
    was_current = Branch.objects.filter(pk__in=doomed, is_current=True).exists()
    branches_drop(doomed)
    own.delete()
    Branch.objects.filter(pk=branch_id).update(
        checkpoint_count=Checkpoint.objects.filter(branch_id=branch_id).count()
    )
    if was_current:
        # The session's current branch went with the writes it was restored from: its parent
        # line, the turn's own branch, is current again.
        Branch.objects.filter(pk=branch_id).update(is_current=True)
        events.branch_changed(session=session_id, branch=branch_id, deleted_checkpoints=gone)
    events.checkpoints_deleted(session=session_id, checkpoints=gone)
