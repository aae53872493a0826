"""What is kept in the cache (access.cache) is forgotten when a rule or a user's groups change,
however they were changed (the admin, the sign-in's group sync, a script)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver

from .cache import forget_groups, forget_rules
from .models import AccessRule


@receiver([post_save, post_delete], sender=AccessRule)
def rule_changed(**kwargs: Any) -> None:
    forget_rules()


@receiver(m2m_changed, sender=get_user_model().groups.through)
def groups_changed(
    *, instance: Any, action: str, reverse: bool, pk_set: set[int] | None, **kwargs: Any
) -> None:
    if action not in ("post_add", "post_remove", "pre_clear", "post_clear"):
        return
    if not reverse:  # user.groups.…: this user
        forget_groups([instance.pk])
    elif pk_set is not None:  # group.user_set.add/remove: these users
        forget_groups(list(pk_set))
    elif isinstance(instance, Group) and action == "pre_clear":  # group.user_set.clear()
        forget_groups(list(instance.user_set.values_list("pk", flat=True)))
