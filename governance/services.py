"""An administrator's restore or rewind on a user's behalf, on the record.

`restore_on_behalf` calls the very `checkpoint_restore` the user's own restore calls, so it takes
the same locks and sends the same events (`branch.changed`, `checkpoint.deleted`) to the user's
open pages and integrations; the audit record is written in the same transaction, so there is
never a restore without its record, nor a record of a restore that did not happen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from accounts.models import User
from checkpoints.errors import CheckpointNotFound
from checkpoints.models import Checkpoint
from checkpoints.selectors import rewind_preview
from checkpoints.services import check_restore_choice, checkpoint_restore
from core import events
from core.errors import InvalidInput, NotFound
from core.validation import check_text
from sessions_app.errors import TurnInProgress
from sessions_app.models import Turn
from sessions_app.services import lock_session
from workspace.services import lock_owner

from .errors import GovernanceForbidden
from .models import REASON_MAX_CHARS, AuditRecord
from .selectors import may_govern

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

    from sessions_app.models import Session


class NoticeNotFound(NotFound):
    def __init__(self, message: str = "Notice not found.") -> None:
        super().__init__(message)


def clean_reason(value: object) -> str:
    """The reason an administrator gives: required text, trimmed, 1 to REASON_MAX_CHARS
    characters, with nothing a database cannot store (NUL, lone surrogates)."""
    if not isinstance(value, str):
        raise InvalidInput("Give the reason for this restore.")
    text = value.strip()
    if not text:
        raise InvalidInput("Give the reason for this restore.")
    if len(text) > REASON_MAX_CHARS:
        raise InvalidInput(f"The reason is limited to {REASON_MAX_CHARS} characters.")
    check_text(text, what="reason")
    return text


@transaction.atomic
def restore_on_behalf(
    *,
    actor: User | AnonymousUser,
    checkpoint: Checkpoint,
    mode: str,
    reason: object,
    session: Session | None = None,
    scope: str = "all",
) -> AuditRecord:
    """Restore `checkpoint` (mode "branch" or "rewind"; scope "all", "conversation" or "files",
    as checkpoint_restore takes them) for the session's owner, as `actor` with `reason`, and
    record it. With `session`, a checkpoint of another session is not found.
    Refused while a turn of the session is queued, running or waits for an approval: the
    administrator acts on a conversation at rest, never under the user's running reply."""
    if not may_govern(actor) or not isinstance(actor, User):
        raise GovernanceForbidden()
    text = clean_reason(reason)
    check_restore_choice(mode, scope)
    found = (
        Checkpoint.objects.filter(pk=checkpoint.pk)
        .values_list("branch__session_id", flat=True)
        .first()
    )
    if found is None or (session is not None and session.pk != found):
        raise CheckpointNotFound()
    if scope != "all":
        lock_owner(found)  # it may write files: the owner's row before the session's lock
    locked = lock_session(found)
    if Turn.objects.filter(session_id=found).active().exists():
        raise TurnInProgress(
            "The agent is answering in this conversation: restore once its turn has ended."
        )
    try:
        current = Checkpoint.objects.select_related("branch").get(pk=checkpoint.pk)
    except Checkpoint.DoesNotExist:
        raise CheckpointNotFound("That checkpoint no longer exists.") from None
    preview = (
        rewind_preview(current, scope=scope) if mode == "rewind" and scope != "files" else None
    )
    result = checkpoint_restore(checkpoint=current, mode=mode, session=locked, scope=scope)
    return AuditRecord.objects.create(
        actor=actor,
        actor_name=actor.get_username(),
        user_id=locked.owner_id,
        session=locked,
        session_ref=locked.pk,
        checkpoint=current,
        checkpoint_ref=current.pk,
        checkpoint_name=current.checkpoint_name,
        action=(
            AuditRecord.Action.REWIND if mode == "rewind" else AuditRecord.Action.RESTORE_AS_BRANCH
        ),
        scope=scope,
        reason=text,
        branch_ref=result.branch.pk,
        deleted_checkpoints=len(result.deleted_checkpoints),
        deleted_messages=preview["messages"] if preview else 0,
        deleted_branches=preview["branches"] if preview else 0,
    )


@transaction.atomic
def admin_notice_dismiss(*, user: User | AnonymousUser, session: Session, pk: int) -> None:
    """The owner dismissed an administrator's notice: it goes from every open page of the
    session (the pages' own sockets are told; no event of the contract)."""
    if not user.is_authenticated or session.owner_id != user.pk:
        raise NoticeNotFound()
    changed = AuditRecord.objects.filter(
        pk=pk, session=session, user_id=user.pk, acknowledged_at__isnull=True
    ).update(acknowledged_at=timezone.now())
    if (
        not changed
        and not AuditRecord.objects.filter(pk=pk, session=session, user_id=user.pk).exists()
    ):
        raise NoticeNotFound()
    events.page_refresh(session=session.pk)
