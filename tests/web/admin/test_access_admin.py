"""The access rules in the admin: their list, their form (saying which models and custom tools
there are), one rule per group and one default rule, and a group's rule on the group's page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from access.models import AccessRule

pytestmark = pytest.mark.django_db

LIST = reverse("admin:access_accessrule_changelist")
ADD = reverse("admin:access_accessrule_add")
MARKUP = "<b>ops</b>"


@pytest.fixture
def admin_client_(client, admin_user):
    client.force_login(admin_user)
    return client


def rule_form(**overrides: str) -> dict[str, str]:
    data = {
        "group": "",
        "model_ids": "",
        "tool_ids": "",
        "all_models": "on",
        "all_tools": "on",
        "may_share": "on",
        "may_use_shell": "on",
        "may_use_api": "on",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def test_the_list_shows_the_default_rule_and_each_groups_rule_with_its_flags(admin_client_):
    group = Group.objects.create(name=MARKUP)
    AccessRule.objects.create(all_models=False, model_ids="gpt-small")
    AccessRule.objects.create(group=group, all_tools=False, tool_ids="", may_use_shell=False)

    page = admin_client_.get(LIST).content.decode()

    assert "Default access" in page
    assert "gpt-small" in page
    assert "every custom tool" in page  # the default rule's
    assert "every allowed model" in page  # the group's
    assert "&lt;b&gt;ops&lt;/b&gt;" in page
    assert MARKUP not in page
    assert page.index("Default access") < page.index("&lt;b&gt;ops")


def test_the_form_lists_the_models_allowed_and_the_custom_tools_configured(admin_client_, settings):
    settings.AGENT_MODEL = "gpt-main"
    settings.AGENT_ALLOWED_MODELS = ["gpt-<i>small</i>"]
    settings.AGENT_TOOLS = ["tests.agents.approval_tools.send_email"]

    page = admin_client_.get(ADD).content.decode()

    assert "<code>gpt-main</code>" in page
    assert "<code>gpt-&lt;i&gt;small&lt;/i&gt;</code>" in page  # a setting, escaped all the same
    assert "<code>send_email</code>" in page


def test_a_tool_setting_that_cannot_load_is_said_not_a_server_error(admin_client_, settings):
    settings.AGENT_TOOLS = ["tests.no_such_module.tool"]

    response = admin_client_.get(ADD)

    assert response.status_code == 200
    assert "AGENT_TOOLS cannot be loaded" in response.content.decode()


def test_a_rule_is_added_with_its_lists(admin_client_):
    group = Group.objects.create(name="engineers")

    response = admin_client_.post(
        ADD,
        rule_form(
            group=str(group.pk), all_models="", model_ids="gpt-a, gpt-b\ngpt-a", may_share=""
        ),
    )

    assert response.status_code == 302
    rule = AccessRule.objects.get(group=group)
    assert rule.model_names == ["gpt-a", "gpt-b"]
    assert not rule.may_share
    assert rule.may_use_api


def test_a_second_default_rule_is_refused_in_words_and_not_saved(admin_client_):
    AccessRule.objects.create()

    response = admin_client_.post(ADD, rule_form(may_share=""))

    assert response.status_code == 200
    page = response.content.decode()
    assert "There is a default rule already (the rule with no group): change that one." in page
    assert "access_rule_one_per_group" not in page
    assert AccessRule.objects.count() == 1


def test_a_second_rule_for_a_group_is_refused_once_in_words(admin_client_):
    group = Group.objects.create(name="engineers")
    AccessRule.objects.create(group=group)

    response = admin_client_.post(ADD, rule_form(group=str(group.pk)))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Access rule with this Group already exists." in page
    assert "default rule already" not in page
    assert AccessRule.objects.count() == 1


def test_a_list_with_too_many_names_is_refused_and_not_saved(admin_client_):
    names = ",".join(f"m{i}" for i in range(201))

    response = admin_client_.post(ADD, rule_form(all_models="", model_ids=names))

    assert response.status_code == 200
    assert "At most 200 models" in response.content.decode()
    assert not AccessRule.objects.exists()


# --- On the group's page -------------------------------------------------------------------------


def group_form(one: Group, **rule: str) -> dict[str, str]:
    data = {
        "name": one.name,
        "access_rule-TOTAL_FORMS": "1" if rule else "0",
        "access_rule-INITIAL_FORMS": "0",
        "access_rule-MIN_NUM_FORMS": "0",
        "access_rule-MAX_NUM_FORMS": "1",
    }
    data.update({f"access_rule-0-{k}": v for k, v in rule.items()})
    return data


def test_the_group_page_adds_the_groups_rule(admin_client_):
    group = Group.objects.create(name="interns")
    url = reverse("admin:auth_group_change", args=[group.pk])

    page = admin_client_.get(url).content.decode()
    assert "access_rule-TOTAL_FORMS" in page
    assert "Allowed here:" in page

    response = admin_client_.post(
        url, group_form(group, model_ids="gpt-small", may_use_api="on", group=str(group.pk))
    )

    assert response.status_code == 302
    rule = AccessRule.objects.get(group=group)
    assert not rule.all_models
    assert rule.model_names == ["gpt-small"]
    assert rule.may_use_api
    assert not rule.may_share


def test_the_group_admin_keeps_its_search_and_saves_a_group_without_a_rule(admin_client_):
    Group.objects.create(name="interns")
    Group.objects.create(name="engineers")

    found = admin_client_.get(reverse("admin:auth_group_changelist") + "?q=intern")
    assert "interns" in found.content.decode()
    assert "engineers" not in found.content.decode()

    response = admin_client_.post(reverse("admin:auth_group_add"), group_form(Group(name="new")))

    assert response.status_code == 302
    assert Group.objects.filter(name="new").exists()
    assert not AccessRule.objects.exists()
