"""Memories: facts about a user that the agent keeps across sessions, at three levels of detail
(seed 001): L0 a one-line abstract, L1 an overview of two or three sentences, L2 the details.

A memory belongs to its user, not to a session or a branch: no restore, rewind or deletion of a
conversation touches it. Its full-text index (memories.search) is made by migration 0002."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.validation import time_in_range

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

    from accounts.models import User

KEY_MAX_LENGTH = 100
L0_MAX_LENGTH = 200
L1_MAX_LENGTH = 1_000


class Category(models.TextChoices):
    SYSTEM = "System"
    ENVIRONMENT = "Environment"
    SKILL = "Skill"
    PROJECT = "Project"
    COMM = "Comm"
    SECURITY = "Security"


class MemoryQuerySet(models.QuerySet["Memory"]):
    def for_user(self, user: User | AnonymousUser) -> MemoryQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(user=user.pk)

    def newest_first(self) -> MemoryQuerySet:
        return self.order_by("-created_at", "-id")


class Memory(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memories"
    )
    key = models.CharField(max_length=KEY_MAX_LENGTH)
    category = models.CharField(max_length=16, choices=Category.choices)
    l0_abstract = models.CharField("L0 abstract", max_length=L0_MAX_LENGTH)
    l1_overview = models.TextField("L1 overview", blank=True, default="")
    l2_details = models.TextField("L2 details", blank=True, default="")
    confidence = models.FloatField(default=1.0)
    access_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = MemoryQuerySet.as_manager()

    class Meta:
        ordering: ClassVar[list[str]] = ["-created_at", "-id"]
        verbose_name_plural = "memories"
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["user", "-created_at"], name="memory_user_created")
        ]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(
                fields=["user", "key"],
                name="memory_key_unique_per_user",
                violation_error_message="This user already has a memory with this key.",
            ),
            models.CheckConstraint(
                condition=Q(category__in=Category.values),
                name="memory_category_known",
                violation_error_message="Unknown category.",
            ),
            models.CheckConstraint(
                condition=Q(confidence__gte=0.0, confidence__lte=1.0),
                name="memory_confidence_0_to_1",
                violation_error_message="The confidence must lie between 0 and 1.",
            ),
            time_in_range("created_at", name="memory_created_at_in_range"),
            time_in_range("updated_at", name="memory_updated_at_in_range"),
        ]

    def __str__(self) -> str:
        return self.key
