"""Reads of share links: the owner's (always starting from the user; another user's link is
reported as not found), and the public page's (by token)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Exists, F, OuterRef, Q, QuerySet

from checkpoints.models import Checkpoint
from checkpoints.rewinds import rewind_cut
from sessions_app.labels import branch_labels
from sessions_app.models import Branch, Message
from sessions_app.selectors import branch_lineage, parse_pk

from .errors import ShareNotFound
from .models import ShareLink
from .tokens import same_hash, token_for, token_hash, well_formed

if TYPE_CHECKING:
    from sessions_app.models import AnyUser


def shares_for_user(user: AnyUser) -> QuerySet[ShareLink]:
    """The user's share links, newest first, with what each shows."""
    return (
        ShareLink.objects.for_user(user)
        .select_related("session", "branch", "checkpoint")
        .order_by("-created_at", "-id")
    )


def get_share_for_user(user: AnyUser, pk: object) -> ShareLink:
    key = parse_pk(pk)
    if key is None:
        raise ShareNotFound()
    try:
        return ShareLink.objects.for_user(user).get(pk=key)
    except ShareLink.DoesNotExist:
        raise ShareNotFound() from None


def share_for_token(token: str) -> ShareLink | None:
    """The link whose address carries `token`, or None (malformed, unknown, deleted, its
    owner deactivated): one indexed lookup by the token's hash, compared again in constant
    time."""
    if not well_formed(token):
        return None
    wanted = token_hash(token)
    # Only while its maker is an active user who still owns the session (an administrator may
    # deactivate an account, or give a session to someone else).
    share = (
        ShareLink.objects.select_related("branch")
        .filter(token_hash=wanted, owner__is_active=True, session__owner=F("owner"))
        .first()
    )
    if share is None or not same_hash(share.token_hash, wanted):
        return None
    return share


def share_token(share: ShareLink) -> str | None:
    """The token of the link's address, made again from its seed; None when the server's
    SECRET_KEY changed since it was made (the link works, its address can no longer be shown)."""
    token = token_for(share.token_seed)
    return token if same_hash(token_hash(token), share.token_hash) else None


def share_labels(shares: Iterable[ShareLink]) -> dict[int, str]:
    """What the owner calls each link's branch (its name, or its default label): one query for
    the branches of all the links' sessions."""
    shares = list(shares)
    sessions = {share.session_id for share in shares}
    if not sessions:
        return {}
    by_session: dict[int, list[Branch]] = defaultdict(list)
    rows = Branch.objects.filter(session_id__in=sessions).select_related("forked_from")
    for branch in rows:
        by_session[branch.session_id].append(branch)
    labels: dict[int, str] = {}
    for branches in by_session.values():
        labels.update(branch_labels(branches))
    return {share.pk: labels.get(share.branch_id, "") for share in shares}


def _shown(share: ShareLink) -> QuerySet[Message]:
    """The messages the link shows: the branch's history below the shared point, among those
    that existed when it was shared. One lineage read (a query) to build this."""
    reach = Q()
    for branch_id, upper in branch_lineage(share.branch, end=share.message_count):
        reach |= Q(branch_id=branch_id, position__lt=upper)
    if not reach:
        return Message.objects.none()
    return Message.objects.filter(reach, id__lte=share.message_mark)


@dataclass(frozen=True)
class SharedPage:
    """One page of what a link shows: `messages` at positions start..end-1 of `count`."""

    messages: list[Message]
    count: int
    start: int
    end: int


def shared_page(share: ShareLink, *, size: int, start: int | None = None) -> SharedPage:
    """A page of `size` messages of what the link shows, from position `start` (by default
    the last page): three queries (the lineage, a count, the page), whatever the length.
    The messages shown are a prefix of the history (positions 0..count-1): a rewind replaces
    only a branch's later positions, and what replaced them is newer than the link."""
    shown = _shown(share)
    count = shown.count()
    first = max(0, count - size) if start is None else max(0, min(start, max(0, count - 1)))
    end = min(count, first + size)
    messages = list(shown.filter(position__gte=first, position__lt=end).order_by("position"))
    return SharedPage(messages=messages, count=count, start=first, end=end)


def shown_counts(shares: Iterable[ShareLink]) -> dict[int, int]:
    """How many messages each link's page shows now: fewer than it was made with once a rewind
    cut its branch below the shared point (a rewind of an ancestor below the fork deletes the
    branch, and its links with it). One query finds the links whose own branch was cut (now
    shorter, or rewritten below the point with newer messages); only those are counted, two
    queries each."""
    shares = list(shares)
    if not shares:
        return {}
    rewritten = Message.objects.filter(
        branch_id=OuterRef("branch_id"),
        position__lt=OuterRef("message_count"),
        id__gt=OuterRef("message_mark"),
    )
    cut = set(
        ShareLink.objects.filter(pk__in=[s.pk for s in shares])
        .filter(Q(branch__message_count__lt=F("message_count")) | Exists(rewritten))
        .values_list("pk", flat=True)
    )
    return {s.pk: _shown(s).count() if s.pk in cut else s.message_count for s in shares}


@dataclass(frozen=True)
class SharesCut:
    """What a rewind to a checkpoint does to its owner's live links: `shortened` links of its
    branch shared past the checkpoint then show less; `deleted` links of the branches forked
    after it go with them."""

    shortened: int
    deleted: int


def shares_a_rewind_cuts(checkpoint: Checkpoint) -> SharesCut:
    """The share links a rewind to `checkpoint` would shorten or delete (its own rule,
    checkpoints.rewinds.rewind_cut): a few indexed counts."""
    cut = rewind_cut(checkpoint.branch, checkpoint.message_count, files_mark=checkpoint.files_mark)
    links = ShareLink.objects.all()
    # A link shows less only when the cut takes a message it shows now (not one that replaced,
    # after an earlier rewind, what it was shared with).
    shown_past_the_cut = Message.objects.filter(
        branch_id=cut.branch_id,
        position__gte=cut.position,
        position__lt=OuterRef("message_count"),
        id__lte=OuterRef("message_mark"),
    )
    shortened = links.filter(branch_id=cut.branch_id).filter(Exists(shown_past_the_cut)).count()
    deleted = links.filter(branch_id__in=cut.branches).count() if cut.branches else 0
    return SharesCut(shortened=shortened, deleted=deleted)
