"""Reads of checkpoints, always starting from the user."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet
from django.db.models.expressions import Window
from django.db.models.functions import RowNumber

from core.validation import NAME_MAX_LENGTH
from sessions_app.models import Branch, Effect, LedgerEntry, Message, Session
from sessions_app.selectors import branch_lineage, common_length, parse_pk
from workspace.models import FileVersion
from workspace.selectors import FilesChange, WorkspaceFile, files_change, workspace_files

from .errors import CheckpointNotFound
from .models import Checkpoint
from .rewinds import RewindCut, rewind_cut

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

    from accounts.models import User
    from sessions_app.models import AnyUser


def get_checkpoint_for_user(user: User | AnonymousUser, pk: int | str) -> Checkpoint:
    key = parse_pk(pk)
    if key is None:
        raise CheckpointNotFound()
    try:
        return (
            Checkpoint.objects.for_user(user)
            .select_related("branch", "branch__session")
            .get(pk=key)
        )
    except Checkpoint.DoesNotExist:
        raise CheckpointNotFound() from None


def checkpoint_place(user: AnyUser, session: Session, pk: object) -> tuple[int, int] | None:
    """Where the user's checkpoint `pk` of `session` sits: its branch's id and its message
    count; None when it is missing, another session's or another user's. One query."""
    key = parse_pk(pk)
    if key is None:
        return None
    found = (
        Checkpoint.objects.for_user(user)
        .filter(pk=key, branch__session=session)
        .values_list("branch_id", "message_count")
        .first()
    )
    return (found[0], found[1]) if found is not None else None


def session_checkpoints(session: Session, *, branch: Branch | None = None) -> QuerySet[Checkpoint]:
    """Checkpoints of every branch of the session (or of one branch), newest first."""
    qs = Checkpoint.objects.filter(branch__session=session)
    if branch is not None:
        qs = qs.filter(branch=branch)
    return qs.order_by("-created_at", "-id")


def lineage_checkpoints(branch: Branch) -> QuerySet[Checkpoint]:
    """The checkpoints that mark a point of this branch's history: its own, and those of its
    ancestors at or before the point where the history left them. Newest first."""
    reach = Q()
    for branch_id, upper in branch_lineage(branch):
        reach |= Q(branch_id=branch_id, message_count__lte=upper)
    return Checkpoint.objects.filter(reach).order_by("-created_at", "-id")


def window_checkpoints(branch: Branch, *, start: int, end: int) -> list[Checkpoint]:
    """The checkpoints of the branch's history (`lineage_checkpoints`) that sit among the
    messages at positions `start` to `end - 1`, for the conversation's markers: a checkpoint of
    n messages sits after the message at position n - 1, so those of a count above `start` up
    to `end` (and those of 0, at the top, when the window starts the history). In the order of
    the history, then of their making. Two queries (the lineage, one index range), whatever the
    history's length or the number of checkpoints outside the window."""
    low = start + 1 if start > 0 else 0
    if end < low:
        return []
    return list(
        lineage_checkpoints(branch)
        .filter(message_count__gte=low, message_count__lte=end)
        .order_by("message_count", "created_at", "id")
    )


def checkpoints_page(
    session: Session,
    *,
    current: Branch,
    kind: str = "all",
    scope: str = "all",
    before: int | None = None,
    count: int,
) -> tuple[list[Checkpoint], int | None]:
    """One page of the session's checkpoints, newest first: of one kind ("manual", "auto") or
    all, of the current branch's line ("branch") or all branches, older than checkpoint `before`
    when given. The page, and the id to ask the next page `before` (None at the end)."""
    qs = lineage_checkpoints(current) if scope == "branch" else session_checkpoints(session)
    if kind != "all":
        qs = qs.filter(is_auto=kind == "auto")
    if before is not None:
        cursor = (
            Checkpoint.objects.filter(pk=before, branch__session=session)
            .values("created_at")
            .first()
        )
        if cursor is None:  # deleted meantime: ids stand in for the order
            qs = qs.filter(pk__lt=before)
        else:
            at = cursor["created_at"]
            qs = qs.filter(Q(created_at__lt=at) | Q(created_at=at, pk__lt=before))
    rows = list(qs.select_related("branch")[: count + 1])
    page = rows[:count]
    return page, (page[-1].pk if len(rows) > count else None)


def find_session_checkpoint(
    session: Session, id_or_name: object, *, branch: Branch | None = None
) -> Checkpoint:
    """A checkpoint of this session by id, or by name (exact match first, then ignoring case).
    Several checkpoints may share a name (automatic ones do): the newest of them in `branch`'s
    history wins when `branch` is given, else the newest in the session. Checkpoints of other
    sessions are never found."""
    qs = Checkpoint.objects.filter(branch__session=session).select_related("branch")
    if isinstance(id_or_name, bool):
        raise CheckpointNotFound()
    if isinstance(id_or_name, int) or (
        isinstance(id_or_name, str) and id_or_name.strip().isdigit()
    ):
        key = parse_pk(id_or_name)
        found = qs.filter(pk=key).first() if key is not None else None
        if found is not None:
            return found
        if isinstance(id_or_name, int):
            raise CheckpointNotFound(f"There is no checkpoint {id_or_name} in this session.")
    if not isinstance(id_or_name, str) or not id_or_name.strip():
        raise CheckpointNotFound("Give a checkpoint id or name.")
    name = id_or_name.strip()
    newest = ("-created_at", "-id")
    scopes = [qs]
    if branch is not None and branch.session_id == session.pk:
        scopes.insert(0, qs.filter(pk__in=lineage_checkpoints(branch).values("pk")))
    for scope in scopes:
        found = (
            scope.filter(checkpoint_name=name).order_by(*newest).first()
            or scope.filter(checkpoint_name__iexact=name).order_by(*newest).first()
        )
        if found is not None:
            return found
    raise CheckpointNotFound(f"There is no checkpoint named {name!r} in this session.")


def namesakes(checkpoint: Checkpoint) -> int:
    """How many other checkpoints of the checkpoint's session share its name (ignoring case)."""
    return (
        Checkpoint.objects.filter(
            branch__session_id=checkpoint.branch.session_id,
            checkpoint_name__iexact=checkpoint.checkpoint_name,
        )
        .exclude(pk=checkpoint.pk)
        .count()
    )


def unused_checkpoint_name(session_id: int, name: str, *, limit: int = NAME_MAX_LENGTH) -> str:
    """`name`, or `name (2)`, `name (3)`... the first that no checkpoint of the session has
    (ignoring case), kept within `limit` characters."""
    taken = {
        n.lower()
        for n in Checkpoint.objects.filter(
            branch__session_id=session_id, checkpoint_name__istartswith=name[: limit - 8]
        ).values_list("checkpoint_name", flat=True)
    }
    if name.lower() not in taken:
        return name
    number = 2
    while True:
        suffix = f" ({number})"
        candidate = name[: limit - len(suffix)] + suffix
        if candidate.lower() not in taken:
            return candidate
        number += 1


def irreversible_effects(
    checkpoint: Checkpoint, *, mode: str, current: Branch | None, scope: str = "all"
) -> list[Message]:
    """What a restore of `checkpoint` leaves behind, oldest first: the entries of the effects
    ledger (sessions_app.models.LedgerEntry) of the external calls that ran (or may have run)
    past the checkpoint on the line of conversation the restore leaves, the parts earlier
    rewinds cut from it included (their messages are gone; the ledger keeps the calls). As a
    branch: the current branch's history past what it shares with the checkpoint's. As a
    rewind: the checkpoint's own branch past it, and the branches the rewind deletes with it.
    A call that never ran (an unknown tool, arguments that failed validation, a refusal) is not
    among them, nor one of a part cut before the checkpoint was taken. Each is given in a tool
    message's shape (`ledger_message`), as the doors (the page, the API, the terminal and
    Telegram) and the model show them. A few small queries, whatever the history's length.
    A restore of the files only (`scope`) leaves none behind: the conversation stays; one of
    the conversation only cuts no file, so its rewind may delete fewer branches."""
    branch = checkpoint.branch
    position = checkpoint.message_count
    if scope == "files":
        return []
    if mode == "rewind":
        keep = scope == "conversation"
        doomed = rewind_cut(
            branch, position, files_mark=checkpoint.files_mark, keep_files=keep
        ).branches
        where = Q(branch_ref=branch.pk, position__gte=position) | Q(branch_ref__in=doomed)
    elif current is None:
        return []
    else:
        shared = common_length(current, branch, b_end=position)
        where = Q(branch_ref=current.pk, position__gte=shared)
        for pk, upper in branch_lineage(current):
            if pk != current.pk and upper > shared:
                where |= Q(branch_ref=pk, position__gte=shared, position__lt=upper)
    entries = list(
        LedgerEntry.objects.filter(session_id=branch.session_id)
        .filter(where)
        .exclude(status=LedgerEntry.Status.FAILED)
        .order_by("created_at", "id")
    )
    # A call of a part cut before the checkpoint was taken is not past it: that rewind left it
    # behind already (and the branch's `left_behind` keeps it).
    live = set(
        Message.objects.filter(pk__in=[e.message_ref for e in entries]).values_list("pk", flat=True)
    )
    return [
        ledger_message(e)
        for e in entries
        if e.message_ref in live or e.created_at >= checkpoint.created_at
    ]


def ledger_message(entry: LedgerEntry) -> Message:
    """A ledger entry as the tool message it was stored as (not saved: the message itself may
    be gone, with the part of a branch a rewind cut)."""
    return Message(
        pk=entry.message_ref,
        # Null only for an entry imported without its branch, which no lineage query finds.
        branch_id=entry.branch_ref,  # type: ignore[misc]
        position=entry.position,
        role=Message.Role.TOOL,
        content=entry.tool_result,
        tool_name=entry.tool_name,
        tool_args=entry.tool_args,
        tool_result=entry.tool_result,
        effect=Effect.EXTERNAL,
        metadata={"ledger": entry.pk, "status": entry.status},
        created_at=entry.created_at,
    )


@dataclass(frozen=True)
class RestoreOutcome:
    """What restoring a checkpoint would do, before the choice: the files it brings back,
    removes or returns to an earlier version (the same in both modes: either way the
    conversation goes on from the checkpoint's workspace), and the external effects each mode
    would leave behind (the ledger, `irreversible_effects`)."""

    files: FilesChange
    as_branch: list[Message]
    as_rewind: list[Message]


def checkpoint_files(checkpoint: Checkpoint) -> list[WorkspaceFile]:
    """The workspace as the checkpoint captured it."""
    return workspace_files(checkpoint.branch, mark=checkpoint.files_mark)


def checkpoint_holds(branch_id: int, version_id: int) -> bool:
    """Whether a checkpoint of `branch_id` shows the file version `version_id`: its mark
    reaches it (workspace.coalescing asks, through workspace.hooks)."""
    return Checkpoint.objects.filter(branch_id=branch_id, files_mark__gte=version_id).exists()


def session_holds(session_id: int) -> bool:
    """Whether a session has a checkpoint or a workspace file (a version of one, even deleted
    since), on any branch: the page's "New session" does not open it again as a blank one
    (sessions_app.services.session_new_or_blank asks, through sessions_app.hooks)."""
    return (
        Checkpoint.objects.filter(branch__session_id=session_id).exists()
        or FileVersion.objects.filter(branch__session_id=session_id).exists()
    )


def restore_outcome(checkpoint: Checkpoint, *, current: Branch) -> RestoreOutcome:
    return RestoreOutcome(
        files=files_change(workspace_files(current), checkpoint_files(checkpoint)),
        as_branch=irreversible_effects(checkpoint, mode="branch", current=current),
        as_rewind=irreversible_effects(checkpoint, mode="rewind", current=current),
    )


def rewind_preview(checkpoint: Checkpoint, *, scope: str = "all") -> dict[str, int]:
    """What a rewind to `checkpoint` would delete, by the rewind's own rule (rewinds.rewind_cut):
    the later messages of its branch, the checkpoints that captured anything it deletes (its
    branch's and those of the branches that would go), the branches forked from what it deletes
    (with their descendants), and the file versions it deletes (`files`: those written on the
    branch after the checkpoint and those of the branches that go), `own_files` of them written
    by a person (uploads and edits in the Files panel or the API, not by a turn's agent). A few
    counts over index ranges, whatever the history's length. `scope` "conversation": the rewind
    that keeps the files (no version deleted)."""
    branch = checkpoint.branch
    position = checkpoint.message_count
    keep = scope == "conversation"
    cut = rewind_cut(branch, position, files_mark=checkpoint.files_mark, keep_files=keep)
    return {
        "messages": max(0, branch.message_count - position),
        "checkpoints": cut.checkpoints().count(),
        "branches": len(cut.branches),
        **_versions_cut(cut),
    }


def _versions_cut(cut: RewindCut) -> dict[str, int]:
    """How many file versions the cut deletes, and how many of them a person wrote (no turn):
    one aggregate over the branch's versions past the cut (the (branch, id) index) and those
    of the branches it deletes (the branch index)."""
    versions = cut.versions()
    if cut.branches:
        versions = versions | FileVersion.objects.filter(branch_id__in=cut.branches)
    counts = versions.aggregate(
        files=Count("id"), own_files=Count("id", filter=Q(turn__isnull=True))
    )
    return {"files": counts["files"] or 0, "own_files": counts["own_files"] or 0}


def auto_checkpoints_beyond(
    *,
    keep_latest: int,
    older_than: datetime | None = None,
    session_id: int | None = None,
    branch_id: int | None = None,
) -> QuerySet[Checkpoint]:
    """The automatic checkpoints that retention may delete: those past the newest `keep_latest`
    of their branch (and, with `older_than`, taken before it), never one a branch was forked
    from. Named checkpoints are never among them. The newest ones are counted over all the
    branch's automatic checkpoints, whatever their age; the age only narrows what goes."""
    autos = Checkpoint.objects.auto()
    if session_id is not None:
        autos = autos.filter(branch__session_id=session_id)
    if branch_id is not None:
        autos = autos.filter(branch_id=branch_id)
    ranked = autos.annotate(
        rank=Window(
            RowNumber(),
            partition_by=[F("branch_id")],
            order_by=[F("created_at").desc(), F("id").desc()],
        )
    )
    beyond = Checkpoint.objects.filter(pk__in=ranked.filter(rank__gt=keep_latest).values("pk"))
    if older_than is not None:
        beyond = beyond.filter(created_at__lt=older_than)
    return beyond.exclude(Exists(Branch.objects.filter(forked_from=OuterRef("pk"))))
