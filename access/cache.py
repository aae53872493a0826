"""The access rules and each user's groups, kept in the cache (Redis when REDIS_URL is set, so
every process sees a change at once): most requests, the API's and the pages', ask
`allowance_for`, and a server with no rule asks the database nothing for it. A change of a rule
or of a user's groups drops what is kept (access.signals); what is kept lasts KEEP_SECONDS at
most in any case."""

from __future__ import annotations

from typing import cast

from django.core.cache import cache

from .models import AccessRule

KEEP_SECONDS = 300
_RULES = "access:rules"


def _groups_key(user_id: int) -> str:
    return f"access:groups:{user_id}"


def rules() -> list[AccessRule]:
    """Every access rule (a short list: one per group at most, and the default)."""
    return cast(
        "list[AccessRule]",
        cache.get_or_set(_RULES, lambda: list(AccessRule.objects.all()), KEEP_SECONDS),
    )


def group_ids(user_id: int) -> frozenset[int]:
    """The ids of the user's groups."""
    from django.contrib.auth.models import Group

    return cast(
        "frozenset[int]",
        cache.get_or_set(
            _groups_key(user_id),
            lambda: frozenset(Group.objects.filter(user=user_id).values_list("pk", flat=True)),
            KEEP_SECONDS,
        ),
    )


def forget_rules() -> None:
    cache.delete(_RULES)


def forget_groups(user_ids: list[int]) -> None:
    """Forget the groups of these users. (A group deleted needs nothing: its rule went with it,
    and its id is never given again.)"""
    cache.delete_many([_groups_key(u) for u in user_ids])
