"""The stored updates (TelegramUpdate) as a queue that loses none and handles each once.

The webhook stores an update before anything else; whoever handles it (the task the webhook
sent, the periodic sweep for an update no task took, the webhook itself for /approve and
/refuse) first claims it with a conditional update of `claimed_at` and `attempts`, so of two
claimants one wins. `handled_at` is set when the handling ended. A claim that never ended (the
process died, the database failed mid-way) goes stale after TELEGRAM_UPDATE_CLAIM_SECONDS and
may be claimed again, up to TELEGRAM_UPDATE_ATTEMPTS claims; then the update is given up.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from integrations.models import TelegramUpdate

# Handled updates are kept this long (Telegram redelivers for at most a day), then deleted.
KEEP_UPDATES = timedelta(days=3)
# An update older than this is not answered any more (Telegram itself drops an undelivered update
# after a day): the sweep gives it up.
ANSWER_WITHIN = timedelta(days=1)


def _stale_claims(now: datetime) -> datetime:
    return now - timedelta(seconds=settings.TELEGRAM_UPDATE_CLAIM_SECONDS)


def _claimable(now: datetime) -> Q:
    """Not handled, claims left, and never claimed or its claim stale."""
    return Q(handled_at__isnull=True, attempts__lt=settings.TELEGRAM_UPDATE_ATTEMPTS) & (
        Q(claimed_at__isnull=True) | Q(claimed_at__lt=_stale_claims(now))
    )


def update_store(
    *, update_id: int, payload: dict[str, Any], handled: bool = False
) -> tuple[TelegramUpdate, bool]:
    """The update's row, made when new (`handled`: stored as handled already, for one the
    webhook drops); True when it was made."""
    defaults: dict[str, Any] = {"payload": payload}
    if handled:
        defaults["handled_at"] = timezone.now()
    return TelegramUpdate.objects.get_or_create(update_id=update_id, defaults=defaults)


def update_waiting(update: TelegramUpdate) -> bool:
    """Nobody handles the stored update now and it may still be: not handled, and not claimed
    or claimed so long ago that its handler is taken for dead."""
    return (
        update.handled_at is None
        and update.attempts < settings.TELEGRAM_UPDATE_ATTEMPTS
        and (update.claimed_at is None or update.claimed_at < _stale_claims(timezone.now()))
    )


def update_claim(*, update_id: int) -> TelegramUpdate | None:
    """The stored update, claimed for handling by this caller; None when it is handled, being
    handled (a claim not yet stale), out of claims, or gone."""
    now = timezone.now()
    claimed = TelegramUpdate.objects.filter(_claimable(now), pk=update_id).update(
        claimed_at=now, attempts=F("attempts") + 1
    )
    if claimed != 1:
        return None
    return TelegramUpdate.objects.filter(pk=update_id).first()


def update_finish(update: TelegramUpdate) -> bool:
    """Mark the claimed update handled; False when the claim was no longer this caller's (it
    went stale and another handler took it over)."""
    return (
        TelegramUpdate.objects.filter(
            pk=update.pk, claimed_at=update.claimed_at, handled_at__isnull=True
        ).update(handled_at=timezone.now())
        == 1
    )


def updates_due(*, limit: int) -> list[int]:
    """The updates the sweep should handle, oldest first: never claimed and stored at least
    TELEGRAM_UPDATE_RETRY_SECONDS ago (no task took them), or claimed by a handler taken for
    dead; claims left, and young enough to answer."""
    now = timezone.now()
    retry = now - timedelta(seconds=settings.TELEGRAM_UPDATE_RETRY_SECONDS)
    due = (
        TelegramUpdate.objects.filter(
            handled_at__isnull=True,
            attempts__lt=settings.TELEGRAM_UPDATE_ATTEMPTS,
            received_at__gte=now - ANSWER_WITHIN,
        )
        .filter(
            Q(claimed_at__isnull=True, received_at__lte=retry)
            | Q(claimed_at__lt=_stale_claims(now))
        )
        .order_by("update_id")
        .values_list("pk", flat=True)
    )
    return list(due[:limit])


def updates_give_up() -> list[TelegramUpdate]:
    """Mark handled, and return, the updates that will never be: their claims are spent (the
    last one stale) or they are too old to answer."""
    now = timezone.now()
    hopeless = TelegramUpdate.objects.filter(handled_at__isnull=True).filter(
        Q(attempts__gte=settings.TELEGRAM_UPDATE_ATTEMPTS, claimed_at__lt=_stale_claims(now))
        | Q(received_at__lt=now - ANSWER_WITHIN)
    )
    given_up = []
    for update in hopeless.only("update_id", "attempts", "received_at", "claimed_at")[:100]:
        # Conditional: a handler that ends meanwhile keeps its own end.
        if (
            TelegramUpdate.objects.filter(
                pk=update.pk, handled_at__isnull=True, claimed_at=update.claimed_at
            ).update(handled_at=now)
            == 1
        ):
            given_up.append(update)
    return given_up


def updates_prune() -> int:
    """Delete the updates received more than KEEP_UPDATES ago, so the table stays bounded."""
    deleted, _ = TelegramUpdate.objects.filter(
        received_at__lt=timezone.now() - KEEP_UPDATES
    ).delete()
    return deleted
