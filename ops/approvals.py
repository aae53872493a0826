"""An administrator's decision on accounts that wait for approval (ACCOUNTS_PENDING): approve
(the account is active from then on, and its owner is told at their next sign-in) or refuse (it
stays inactive, and signing in says it was refused). One audit record per decision, naming the
accounts it changed; an account already decided that way is left as it is, and counted apart.
An approved account cannot be refused here: turning it off is the admin's "Active" box."""

from __future__ import annotations

import hashlib

from django.db import transaction
from django.utils import timezone

from accounts.models import APPROVAL_UNTOLD, User

from .audit import Outcome, Progress, Who, listed, run_audited
from .models import AuditRecord


def accounts_approve(*, user_ids: list[int], who: Who) -> AuditRecord:
    """Approve the accounts of `user_ids` that wait (or were refused)."""
    return _decide(user_ids, who, approve=True)


def accounts_refuse(*, user_ids: list[int], who: Who) -> AuditRecord:
    """Refuse the accounts of `user_ids` that wait."""
    return _decide(user_ids, who, approve=False)


def _decide(user_ids: list[int], who: Who, *, approve: bool) -> AuditRecord:
    ids = sorted({int(pk) for pk in user_ids})
    rule = AuditRecord.Rule.APPROVE_ACCOUNTS if approve else AuditRecord.Rule.REFUSE_ACCOUNTS

    def work(progress: Progress) -> Outcome:
        changed: list[str] = []
        with transaction.atomic():
            # Row locks, in order of id: two decisions at once on one account take turns, and
            # the second finds it decided.
            users = list(User.objects.select_for_update().filter(pk__in=ids).order_by("pk"))
            now = timezone.now()
            for user in users:
                if not _open_to(user, approve=approve):
                    continue
                user.approval = User.Approval.APPROVED if approve else User.Approval.REFUSED
                user.approval_decided_at = now
                fields = ["approval", "approval_decided_at"]
                if approve:
                    user.is_active = True
                    metadata = user.metadata if isinstance(user.metadata, dict) else {}
                    user.metadata = {**metadata, APPROVAL_UNTOLD: True}
                    fields += ["is_active", "metadata"]
                user.save(update_fields=fields)
                changed.append(user.get_username())
                progress()
        left = len(ids) - len(changed)
        return Outcome(affected=len(changed), details={"users": listed(changed), "left": left})

    return run_audited(
        rule=rule,
        who=who,
        dry_run=False,
        parameters={"user_ids": ids[:200], "count": len(ids)},
        target=_target(ids),
        work=work,
    )


def _open_to(user: User, *, approve: bool) -> bool:
    if approve:
        return user.approval != User.Approval.APPROVED
    return user.approval == User.Approval.PENDING


def _target(ids: list[int]) -> str:
    """The record's target: the accounts' ids, or (too many to name in 100 characters) their
    count and a digest of them."""
    named = "users " + ",".join(map(str, ids))
    if len(named) <= 100:
        return named
    digest = hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()[:12]
    return f"{len(ids)} users ({digest})"
