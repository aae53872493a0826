"""Admin console for memories: list, search, filter by category and owner, edit (through the
memory service's checks), delete."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from core.errors import InvalidInput
from memories.models import Memory
from memories.validation import CLEANERS
from web.admin.support import ConversationAdmin, OwnerFilter


class MemoryOwnerFilter(OwnerFilter):
    owner_path = "user"


class MemoryForm(forms.ModelForm):
    class Meta:
        model = Memory
        fields = ("key", "category", "l0_abstract", "l1_overview", "l2_details", "confidence")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for name, clean in CLEANERS.items():
            if name in cleaned:
                try:
                    cleaned[name] = clean(cleaned[name])
                except InvalidInput as exc:
                    self.add_error(name, exc.message)
        return cleaned


@admin.register(Memory)
class MemoryAdmin(ConversationAdmin):
    form = MemoryForm
    list_display = ("id", "key", "category", "l0_abstract", "user", "access_count", "updated_at")
    list_select_related = ("user",)
    list_filter = ("category", MemoryOwnerFilter)
    search_fields = ("key", "l0_abstract")
    fields = (
        "id",
        "user",
        "key",
        "category",
        "l0_abstract",
        "l1_overview",
        "l2_details",
        "confidence",
        "access_count",
        "created_at",
        "updated_at",
    )
    readonly_fields = ("id", "user", "access_count", "created_at", "updated_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A memory is its user's: they (or their agent) make it.
        return False
