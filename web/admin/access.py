"""Admin console for the access rules (access.AccessRule): which models and custom tools a group's
members may use, and whether they may share links, use the shell tools and the API. The rule with
no group is the default, for those in no group with a rule. A rule is edited on its own list and
on its group's page (an inline on Django's group admin, which is otherwise as Django has it).

The form's help says what the names may be: the models this server allows
(core.model_choice.allowed_models) and the custom tools it has (AGENT_TOOLS). Those come from the
settings, not from a visitor, and are escaped all the same (the admin shows help as markup)."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin as BaseGroupAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import ImproperlyConfigured
from django.db.models import F
from django.utils.html import format_html, format_html_join

from access.models import AccessRule
from core.model_choice import allowed_models

RULE_FIELDS = (
    "all_models",
    "model_ids",
    "all_tools",
    "tool_ids",
    "may_share",
    "may_use_shell",
    "may_use_api",
)


def _names_help(intro: str, names: list[str], none: str) -> str:
    listed = format_html_join(", ", "<code>{}</code>", ((n,) for n in names))
    return format_html("{} {}", intro, listed) if names else format_html("{} {}", intro, none)


def custom_tool_names() -> list[str] | None:
    """The names of the custom tools this server has (AGENT_TOOLS); None when they cannot be
    loaded (the server's start reports why). The tools' code (agno's) is imported here, not
    with the admin: django.setup() in every process imports the admin, and no model library."""
    from agents.tools import configured_tools, names_of

    try:
        return sorted(names_of(configured_tools()))
    except ImproperlyConfigured:
        return None


class AccessRuleForm(forms.ModelForm):
    class Meta:
        model = AccessRule
        fields = ("group", *RULE_FIELDS)
        widgets = {  # noqa: RUF012
            "model_ids": forms.Textarea(attrs={"rows": 3}),
            "tool_ids": forms.Textarea(attrs={"rows": 3}),
        }

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["model_ids"].help_text = _names_help(
            "Otherwise these model ids, separated by commas or lines. Allowed here:",
            allowed_models(),
            "none.",
        )
        tools = custom_tool_names()
        self.fields["tool_ids"].help_text = (
            _names_help(
                "Otherwise these custom tools, by name, separated by commas or lines. "
                "Configured here (AGENT_TOOLS):",
                tools,
                "none.",
            )
            if tools is not None
            else "Otherwise these custom tools, by name, separated by commas or lines. "
            "(AGENT_TOOLS cannot be loaded: the server's log says why.)"
        )


def _shown(every: bool, names: list[str], what: str) -> str:
    if every:
        return f"every {what}"
    return ", ".join(names) or "none"


@admin.register(AccessRule)
class AccessRuleAdmin(admin.ModelAdmin):
    form = AccessRuleForm
    list_display = (
        "whose",
        "models_shown",
        "tools_shown",
        "may_share",
        "may_use_shell",
        "may_use_api",
        "updated_at",
    )
    list_display_links = ("whose",)
    list_filter = ("may_share", "may_use_shell", "may_use_api", "all_models", "all_tools")
    list_select_related = ("group",)
    search_fields = ("group__name",)
    # The default rule first, then the groups' by name.
    ordering = (F("group__name").asc(nulls_first=True),)

    @admin.display(description="For", ordering="group__name")
    def whose(self, rule: AccessRule) -> str:
        return rule.group.name if rule.group is not None else "Default access"

    @admin.display(description="Models")
    def models_shown(self, rule: AccessRule) -> str:
        return _shown(rule.all_models, rule.model_names, "allowed model")

    @admin.display(description="Custom tools")
    def tools_shown(self, rule: AccessRule) -> str:
        return _shown(rule.all_tools, rule.tool_names, "custom tool")


class AccessRuleInline(admin.StackedInline):
    """The group's rule on the group's page: none until one is added."""

    model = AccessRule
    form = AccessRuleForm
    fields = RULE_FIELDS
    extra = 0
    max_num = 1
    verbose_name = "access rule"
    verbose_name_plural = "access rule"


admin.site.unregister(Group)


@admin.register(Group)
class GroupAdmin(BaseGroupAdmin):
    """Django's group admin, with the group's access rule."""

    inlines = (AccessRuleInline,)
