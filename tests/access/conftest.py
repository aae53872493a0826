from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from access.models import AccessRule


@pytest.fixture
def models_offered(fake_llm, settings):
    """A model server that offers three models; AGENT_MODEL is fake-model."""
    settings.AGENT_ALLOWED_MODELS = ["fake-small", "fake-large"]
    return fake_llm


def grant(name: str, *members, **rule) -> Group:
    """A group `name` with `members` and an access rule of `rule`'s fields."""
    group, _ = Group.objects.get_or_create(name=name)
    for member in members:
        member.groups.add(group)
    AccessRule.objects.update_or_create(group=group, defaults=rule)
    return group
