"""An access rule: what the members of one group (or, with no group, everyone in no group with a
rule) may do."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import ClassVar

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Coalesce

NAMES_MAX = 200  # the most names a rule's list holds
NAME_MAX_CHARS = 200
_SEPARATORS = re.compile(r"[,\n\r]+")


def names_in(text: str) -> list[str]:
    """The names a rule's list holds: separated by commas or lines, trimmed, each once."""
    return list(dict.fromkeys(n.strip() for n in _SEPARATORS.split(text or "") if n.strip()))


def check_names(text: str, *, what: str) -> None:
    names = names_in(text)
    if "\x00" in text:
        raise ValidationError(f"The {what} cannot contain NUL characters.")
    if len(names) > NAMES_MAX:
        raise ValidationError(f"At most {NAMES_MAX} {what} (this lists {len(names):,}).")
    long = [n for n in names if len(n) > NAME_MAX_CHARS]
    if long:
        raise ValidationError(
            f"Each of the {what} is at most {NAME_MAX_CHARS} characters ({long[0][:40]!r}… is "
            "longer)."
        )


class AccessRule(models.Model):
    """What a group's members may do. A user's rules add up (the union of their models and
    tools, any group's yes for the rest); the rule with no group applies to those in no group
    with a rule (access.selectors.allowance_for)."""

    group = models.OneToOneField(
        Group,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="access_rule",
        help_text=(
            "Leave empty for the default rule: what users in no group with a rule may do. "
            "With no default rule they may do everything."
        ),
    )
    all_models = models.BooleanField(
        "every allowed model",
        default=True,
        help_text="Every model the server allows (AGENT_MODEL and AGENT_ALLOWED_MODELS).",
    )
    model_ids = models.TextField(
        "models",
        blank=True,
        default="",
        help_text="Otherwise these model ids, separated by commas or lines.",
    )
    all_tools = models.BooleanField(
        "every custom tool",
        default=True,
        help_text="Every custom tool the operator configured (AGENT_TOOLS).",
    )
    tool_ids = models.TextField(
        "custom tools",
        blank=True,
        default="",
        help_text="Otherwise these custom tools, by name, separated by commas or lines.",
    )
    may_share = models.BooleanField("may share links", default=True)
    may_use_shell = models.BooleanField(
        "may use the shell tools",
        default=True,
        help_text="run_shell and run_tests, in the sandbox.",
    )
    may_use_api = models.BooleanField(
        "may use the API", default=True, help_text="The REST API, with an API key or a browser."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "access rule"
        verbose_name_plural = "access rules"
        constraints: ClassVar[list[models.BaseConstraint]] = [
            # One rule per group, and one default rule (no group).
            models.UniqueConstraint(
                Coalesce("group", 0),
                name="access_rule_one_per_group",
                violation_error_message=(
                    "There is a default rule already (the rule with no group): change that one."
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"Access of {self.group.name}" if self.group is not None else "Default access"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        for field, what in (("model_ids", "models"), ("tool_ids", "custom tools")):
            try:
                check_names(getattr(self, field), what=what)
            except ValidationError as exc:
                errors[field] = exc.messages[0]
        if errors:
            raise ValidationError(errors)

    def validate_constraints(self, exclude: Collection[str] | None = None) -> None:
        # A group's second rule is refused by the group's own uniqueness (a one-to-one field),
        # in its words; the constraint speaks only of the default rule.
        if self.group_id is not None:
            exclude = {*(exclude or ()), "group"}
        super().validate_constraints(exclude)

    @property
    def model_names(self) -> list[str]:
        return names_in(self.model_ids)

    @property
    def tool_names(self) -> list[str]:
        return names_in(self.tool_ids)
