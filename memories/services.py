"""Writes of memories: create, update, remember (create or update by key), delete, and counting
the accesses of a recall. Every field goes through memories.validation first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import User
from accounts.services import lock_user

from .errors import MemoryKeyTaken, MemoryLimitReached
from .models import Memory
from .validation import clean_fields

if TYPE_CHECKING:
    from collections.abc import Iterable


def _quota_check(user: User) -> None:
    """Refuse one more memory when the user has MEMORY_MAX_PER_USER. Locks the user's row, so
    two creations at once cannot both take the last place."""
    lock_user(user.pk)
    limit = settings.MEMORY_MAX_PER_USER
    count = Memory.objects.filter(user=user).count()
    if count >= limit:
        raise MemoryLimitReached(count, limit)


@transaction.atomic
def memory_create(
    *,
    user: User,
    key: object,
    category: object,
    l0_abstract: object,
    l1_overview: object = "",
    l2_details: object = "",
    confidence: object = 1.0,
) -> Memory:
    """A new memory of `user`; MemoryKeyTaken (409) when they have one with that key."""
    fields = clean_fields(
        {
            "key": key,
            "category": category,
            "l0_abstract": l0_abstract,
            "l1_overview": l1_overview,
            "l2_details": l2_details,
            "confidence": confidence,
        }
    )
    _quota_check(user)
    if Memory.objects.filter(user=user, key=fields["key"]).exists():
        raise MemoryKeyTaken(fields["key"])
    try:
        with transaction.atomic():
            return Memory.objects.create(user=user, **fields)
    except IntegrityError:  # the same key, written meanwhile by another request
        raise MemoryKeyTaken(fields["key"]) from None


@transaction.atomic
def memory_update(*, memory: Memory, **changes: object) -> Memory:
    """Change the given fields of `memory` (any of key, category, l0_abstract, l1_overview,
    l2_details, confidence); MemoryKeyTaken when the new key is another memory's."""
    fields = clean_fields(changes)
    if not fields:
        return memory
    key = fields.get("key")
    if (
        key is not None
        and Memory.objects.filter(user_id=memory.user_id, key=key).exclude(pk=memory.pk).exists()
    ):
        raise MemoryKeyTaken(key)
    try:
        with transaction.atomic():
            Memory.objects.filter(pk=memory.pk).update(**fields, updated_at=timezone.now())
    except IntegrityError:
        raise MemoryKeyTaken(str(key)) from None
    memory.refresh_from_db()
    return memory


@transaction.atomic
def memory_remember(
    *,
    user: User,
    key: object,
    category: object,
    l0_abstract: object,
    l1_overview: object = "",
    l2_details: object = "",
) -> tuple[Memory, bool]:
    """What the agent's `remember` tool does: the user's memory under `key` now says this (made
    when there was none). Returns it and whether it was made."""
    fields = clean_fields(
        {
            "key": key,
            "category": category,
            "l0_abstract": l0_abstract,
            "l1_overview": l1_overview,
            "l2_details": l2_details,
        }
    )
    existing = Memory.objects.select_for_update().filter(user=user, key=fields["key"]).first()
    if existing is not None:
        return memory_update(memory=existing, **fields), False
    return memory_create(user=user, **fields), True


def memory_delete(*, memory: Memory) -> None:
    Memory.objects.filter(pk=memory.pk).delete()


def memories_touch(*, memories: Iterable[Memory]) -> None:
    """Count one access of each memory (a recall returned it), atomically in the database."""
    ids = [m.pk for m in memories]
    if ids:
        Memory.objects.filter(pk__in=ids).update(access_count=F("access_count") + 1)
