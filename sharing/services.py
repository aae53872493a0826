"""Writes of share links: make one (under the owner's and the session's locks), delete one,
count a visit."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from access.selectors import sharing_check
from accounts.models import User
from accounts.services import lock_user
from checkpoints.models import Checkpoint
from checkpoints.selectors import lineage_checkpoints
from sessions_app.errors import BranchNotFound
from sessions_app.models import Branch, Message
from sessions_app.services import lock_session

from .errors import CheckpointNotInBranch, ShareLimitReached
from .models import ShareLink
from .selectors import get_share_for_user
from .tokens import new_seed, token_for, token_hash


def share_limit_check(*, owner: User) -> None:
    """Refuse one more link when `owner` has ROLLBACK_MAX_SHARES_PER_USER. Hold the owner's
    row lock (`lock_user`), so two at once cannot both take the last place."""
    limit = settings.ROLLBACK_MAX_SHARES_PER_USER
    count = ShareLink.objects.filter(owner=owner).count()
    if count >= limit:
        raise ShareLimitReached(count, limit)


@transaction.atomic
def share_create(
    *, owner: User, branch: Branch, checkpoint: Checkpoint | None = None
) -> tuple[ShareLink, str]:
    """A link to `branch`'s history as it stands now, or up to `checkpoint` (one of the points
    of that history: its own checkpoints, or its ancestors' before the fork), and the token of
    its address (stored only as a hash). Under the owner's lock (the limit), then the
    session's (every message write takes it: the newest message id read here is the history's
    last word, and no write of this session is halfway)."""
    sharing_check(owner)
    lock_user(owner.pk)
    share_limit_check(owner=owner)
    lock_session(branch.session_id)
    try:
        branch = Branch.objects.select_related("session").get(pk=branch.pk, session__owner=owner)
    except Branch.DoesNotExist:
        raise BranchNotFound() from None
    count = branch.message_count
    if checkpoint is not None:
        if not lineage_checkpoints(branch).filter(pk=checkpoint.pk).exists():
            raise CheckpointNotInBranch()
        count = checkpoint.message_count
    mark = Message.objects.order_by("-id").values_list("id", flat=True).first() or 0
    seed = new_seed()
    token = token_for(seed)
    share = ShareLink.objects.create(
        owner=owner,
        session=branch.session,
        branch=branch,
        checkpoint=checkpoint,
        message_count=count,
        message_mark=mark,
        token_hash=token_hash(token),
        token_seed=seed,
    )
    return share, token


@transaction.atomic
def share_delete(*, owner: User, share_id: object) -> None:
    """Delete one of the owner's links: its address is a 404 from now on."""
    share = get_share_for_user(owner, share_id)
    share.delete()


def share_viewed(*, share: ShareLink) -> None:
    """Count a visit: one conditional update (F()), so visits at once all count."""
    ShareLink.objects.filter(pk=share.pk).update(
        views=F("views") + 1, last_viewed_at=timezone.now()
    )
