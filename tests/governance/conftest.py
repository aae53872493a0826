from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission


def staff_user(django_user_model, username: str, *, govern: bool):
    """An active staff member, holding the governance permission when `govern`."""
    user = django_user_model.objects.create_user(username, password="staff-password-1")  # noqa: S106 - a test user's password
    user.is_staff = True
    user.save()
    if govern:
        user.user_permissions.add(Permission.objects.get(codename="govern_conversations"))
    return django_user_model.objects.get(pk=user.pk)  # no cached permissions


@pytest.fixture
def governor(django_user_model):
    return staff_user(django_user_model, "governor", govern=True)


@pytest.fixture
def clerk(django_user_model):
    """Staff without the governance permission."""
    return staff_user(django_user_model, "clerk", govern=False)
