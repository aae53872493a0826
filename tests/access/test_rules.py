"""What a user may do, from their groups' access rules (access.selectors.allowance_for)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from access.errors import ModelNotAllowed
from access.models import AccessRule
from access.selectors import allowance_for, default_model_for, model_check, models_for
from accounts.models import User
from tests.access.conftest import grant

pytestmark = pytest.mark.django_db


def fresh(user: User) -> User:
    """The user as a new request reads them (the allowance is kept on the object)."""
    return User.objects.get(pk=user.pk)


def test_with_no_rule_everyone_may_do_everything(alice, models_offered):
    allowance = allowance_for(alice)
    assert allowance.models is None
    assert allowance.tools is None
    assert allowance.may_share
    assert allowance.may_use_shell
    assert allowance.may_use_api
    assert models_for(alice) == ["fake-model", "fake-small", "fake-large"]


def test_a_groups_rule_limits_its_members_and_the_others_keep_everything(
    alice, bob, models_offered
):
    grant("interns", alice, all_models=False, model_ids="fake-small", may_share=False)
    assert models_for(fresh(alice)) == ["fake-small"]
    assert not allowance_for(fresh(alice)).may_share
    assert models_for(fresh(bob)) == ["fake-model", "fake-small", "fake-large"]


def test_permissions_add_up_across_groups(alice, models_offered):
    grant(
        "a",
        alice,
        all_models=False,
        model_ids="fake-small",
        may_share=False,
        may_use_api=True,
        may_use_shell=False,
    )
    grant(
        "b",
        alice,
        all_models=False,
        model_ids="fake-large\nfake-small",
        may_share=True,
        may_use_api=False,
        may_use_shell=False,
    )
    allowance = allowance_for(fresh(alice))
    assert models_for(fresh(alice)) == ["fake-small", "fake-large"]
    assert allowance.may_share
    assert allowance.may_use_api
    assert not allowance.may_use_shell


def test_the_default_rule_is_for_those_in_no_group_with_a_rule(alice, bob, models_offered):
    AccessRule.objects.create(group=None, all_models=False, model_ids="fake-small", may_share=False)
    grant("staffers", alice, all_models=True, may_share=True)
    Group.objects.create(name="no rule").user_set.add(bob)  # a group without a rule: no matter
    assert models_for(fresh(bob)) == ["fake-small"]
    assert not allowance_for(fresh(bob)).may_share
    assert models_for(fresh(alice)) == ["fake-model", "fake-small", "fake-large"]
    assert allowance_for(fresh(alice)).may_share


def test_administrators_may_do_everything(admin_user, models_offered):
    AccessRule.objects.create(group=None, all_models=False, model_ids="", may_use_api=False)
    assert allowance_for(admin_user).may_use_api
    assert models_for(admin_user) == ["fake-model", "fake-small", "fake-large"]


def test_the_default_model_is_the_first_the_user_may_use(alice, models_offered):
    grant("g", alice, all_models=False, model_ids="fake-large")
    assert default_model_for(fresh(alice)) == "fake-large"
    assert model_check(fresh(alice), None) == "fake-large"
    with pytest.raises(ModelNotAllowed, match="you may use: fake-large"):
        model_check(fresh(alice), "fake-small")


def test_a_user_with_no_model_is_told_to_ask_an_administrator(alice, models_offered):
    grant("g", alice, all_models=False, model_ids="not-a-served-model")
    with pytest.raises(ModelNotAllowed, match="ask an administrator"):
        model_check(fresh(alice), None)


def test_a_change_of_groups_or_rules_is_seen_by_the_next_request(alice, models_offered):
    group = grant("g", alice, all_models=False, model_ids="fake-small")
    assert models_for(fresh(alice)) == ["fake-small"]
    alice.groups.remove(group)  # removed from the group (the cache forgets: access.signals)
    assert models_for(fresh(alice)) == ["fake-model", "fake-small", "fake-large"]
    group.user_set.add(alice)  # added back from the group's side
    assert models_for(fresh(alice)) == ["fake-small"]
    rule = AccessRule.objects.get(group=group)
    rule.model_ids = "fake-large"
    rule.save()
    assert models_for(fresh(alice)) == ["fake-large"]
    group.delete()
    assert models_for(fresh(alice)) == ["fake-model", "fake-small", "fake-large"]


def test_a_rules_lists_are_bounded_with_clear_errors():
    rule = AccessRule(model_ids=",".join(f"m{i}" for i in range(201)))
    with pytest.raises(ValidationError, match="At most 200 models"):
        rule.full_clean()
    rule = AccessRule(tool_ids="x" * 201)
    with pytest.raises(ValidationError, match="at most 200 characters"):
        rule.full_clean()
    assert AccessRule(model_ids="a, b\nb\n\n c").model_names == ["a", "b", "c"]


def test_one_rule_per_group_and_one_default():
    AccessRule.objects.create(group=None)
    with pytest.raises(IntegrityError), transaction.atomic():
        AccessRule.objects.create(group=None)
    group = Group.objects.create(name="g")
    AccessRule.objects.create(group=group)
    with pytest.raises(IntegrityError), transaction.atomic():
        AccessRule.objects.create(group=group)
