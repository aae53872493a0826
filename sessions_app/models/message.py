"""A message: one entry of a branch's history, written once (but for its feedback), never copied."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.validation import time_in_range

from .branch import Branch

if TYPE_CHECKING:
    from .session import AnyUser


class MessageQuerySet(models.QuerySet["Message"]):
    def for_user(self, user: AnyUser) -> MessageQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(branch__session__owner=user.pk)

    def rated(self) -> MessageQuerySet:
        """The assistant replies that carry their owner's feedback (sessions_app.feedback)."""
        return self.filter(role="assistant", metadata__has_key="feedback")


class Effect(models.TextChoices):
    """What a tool call did beyond the conversation (api-contract.md, "Workspace and tools with
    effects")."""

    NONE = "none"
    WORKSPACE = "workspace"
    EXTERNAL = "external"


class Message(models.Model):
    """One entry of a branch's history. Written once, never copied; the one change a message
    ever sees is its owner's feedback on a reply (`metadata["feedback"]`, sessions_app.feedback)."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SYSTEM = "system"
        TOOL = "tool"

    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True, default="")
    # A tool message: which tool ran, with what arguments, what it returned, and the id of the
    # call it answers. An assistant message: the tool calls it made, as the model protocol has them.
    tool_name = models.CharField(max_length=200, blank=True, default="")
    tool_args = models.JSONField(null=True, blank=True)
    tool_result = models.TextField(blank=True, default="")
    tool_call_id = models.CharField(max_length=200, blank=True, default="")
    tool_calls = models.JSONField(null=True, blank=True)
    # A tool message: what the call did beyond this conversation. `none`: it only read;
    # `workspace`: it changed the session's files (a restore undoes it); `external`: it acted on
    # the outside world (nothing here can undo it). Empty for the other roles.
    effect = models.CharField(max_length=16, choices=Effect.choices, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    metadata = models.JSONField(default=dict, blank=True)

    objects = MessageQuerySet.as_manager()

    class Meta:
        ordering: ClassVar[list[str]] = ["position"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["branch", "position"], name="message_position_unique"),
            models.CheckConstraint(
                condition=Q(role__in=["user", "assistant", "system", "tool"]),
                name="message_role_valid",
            ),
            time_in_range("created_at", name="message_created_at_in_range"),
        ]

    def __str__(self) -> str:
        return f"{self.role} #{self.position}"


class RatedMessage(Message):
    """The assistant replies their owners rated (sessions_app.feedback), as the admin lists them
    (web.admin.messages): the same rows, no table of their own."""

    class Meta:
        proxy = True
        verbose_name = "rated reply"
        verbose_name_plural = "rated replies"
