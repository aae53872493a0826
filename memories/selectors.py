"""Reads of memories. Every lookup starts from the user: nobody reaches another's memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import F, QuerySet

from .errors import MemoryNotFound
from .models import Memory, MemoryQuerySet
from .search import search_memories

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

    from accounts.models import User


def memories_for_user(user: User | AnonymousUser) -> MemoryQuerySet:
    return Memory.objects.for_user(user)


def get_memory_for_user(user: User | AnonymousUser, pk: object) -> Memory:
    """One of the user's memories; MemoryNotFound for a missing one and another user's alike."""
    try:
        return memories_for_user(user).get(pk=int(str(pk)))
    except (Memory.DoesNotExist, ValueError, OverflowError):
        raise MemoryNotFound(pk) from None


def memory_by_key(user: User, key: str) -> Memory | None:
    return memories_for_user(user).filter(key=key.strip().lower()).first()


def memories_listed(user: User | AnonymousUser, *, query: str = "") -> QuerySet[Memory]:
    """The user's memories: best match first for a search, else newest first."""
    memories = memories_for_user(user)
    if not query.strip():
        return memories.newest_first()
    return search_memories(memories, query)


def memories_recalled(user: User, query: str, *, limit: int) -> list[Memory]:
    """What the agent's recall returns: the best matches of any word of `query`, or the newest
    memories for an empty query; at most `limit`."""
    memories = memories_for_user(user)
    if not query.strip():
        return list(memories.newest_first()[:limit])
    return list(search_memories(memories, query, any_term=True)[:limit])


def prompt_memories(user: User, message: str, *, budget: int) -> list[Memory]:
    """The memories whose L0 lines the system prompt carries for a turn: those most relevant to
    `message` (the search, any of its words), then the most used and newest, for as long as
    their lines fit in `budget` characters."""
    if budget <= 0:
        return []
    memories = memories_for_user(user)
    picked: list[Memory] = []
    seen: set[int] = set()
    used = 0
    # The most used first: a user with no memories (most turns) costs this one query.
    most_used = list(memories.order_by(F("access_count").desc(), "-updated_at", "-id")[:200])
    if not most_used:
        return []
    candidates = [*search_memories(memories, message, any_term=True)[:50], *most_used]
    for memory in candidates:
        if memory.pk in seen:
            continue
        seen.add(memory.pk)
        size = len(prompt_line(memory)) + 1
        if used + size > budget:
            continue  # a shorter line further on may still fit
        picked.append(memory)
        used += size
    return picked


def prompt_line(memory: Memory) -> str:
    return f"- [{memory.key}] ({memory.category}) {memory.l0_abstract}"
