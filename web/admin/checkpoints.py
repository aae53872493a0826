"""Admin console for checkpoints. Deleting goes through `checkpoint_delete`, so the branches'
checkpoint counts stay right; messages are never touched."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import ngettext

from checkpoints.errors import CheckpointNotFound
from checkpoints.models import Checkpoint, CheckpointQuerySet
from checkpoints.services import checkpoint_delete
from core.errors import InvalidInput
from core.validation import clean_description, clean_name
from web.admin.support import ConversationAdmin, OwnerFilter, admin_link

if TYPE_CHECKING:
    from accounts.models import User
    from sessions_app.models import Session


class KindFilter(admin.SimpleListFilter):
    title = "kind"
    parameter_name = "kind"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        return [("manual", "manual"), ("auto", "automatic")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Checkpoint]:
        # The admin lists Checkpoint.objects.
        assert isinstance(queryset, CheckpointQuerySet)  # noqa: S101 - narrowing for mypy
        if self.value() == "manual":
            return queryset.manual()
        if self.value() == "auto":
            return queryset.auto()
        return queryset


class CheckpointOwnerFilter(OwnerFilter):
    owner_path = "branch__session__owner"


class CheckpointForm(forms.ModelForm):
    class Meta:
        model = Checkpoint
        fields = ("checkpoint_name", "description")

    def clean_checkpoint_name(self) -> str:
        try:
            return clean_name(self.cleaned_data.get("checkpoint_name"), what="checkpoint")
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message) from None

    def clean_description(self) -> str:
        try:
            return clean_description(self.cleaned_data.get("description"))
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message) from None


@admin.register(Checkpoint)
class CheckpointAdmin(ConversationAdmin):
    form = CheckpointForm
    list_display = (
        "id",
        "checkpoint_name",
        "branch",
        "session",
        "owner",
        "kind",
        "message_count",
        "created_at",
    )
    list_select_related = ("branch", "branch__session", "branch__session__owner")
    list_filter = (KindFilter, ("created_at", admin.DateFieldListFilter), CheckpointOwnerFilter)
    search_fields = ("checkpoint_name",)
    actions = ("delete_checkpoints",)
    fields = (
        "id",
        "checkpoint_name",
        "description",
        "branch_link",
        "session_link",
        "owner",
        "kind",
        "message_count",
        "session_state",
        "metadata",
        "created_at",
    )
    readonly_fields = (
        "id",
        "branch_link",
        "session_link",
        "owner",
        "kind",
        "message_count",
        "session_state",
        "metadata",
        "created_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Checkpoint]:
        # The change page shows the branch, session and owner: one query for all of them.
        return super().get_queryset(request).select_related("branch__session__owner")

    @admin.display(description="session", ordering="branch__session")
    def session(self, obj: Checkpoint) -> Session:
        return obj.branch.session

    @admin.display(description="owner", ordering="branch__session__owner")
    def owner(self, obj: Checkpoint) -> User:
        return obj.branch.session.owner

    @admin.display(description="kind", ordering="is_auto")
    def kind(self, obj: Checkpoint) -> str:
        return "automatic" if obj.is_auto else "manual"

    @admin.display(description="branch")
    def branch_link(self, obj: Checkpoint) -> str:
        return admin_link(obj.branch)

    @admin.display(description="session")
    def session_link(self, obj: Checkpoint) -> str:
        return admin_link(obj.branch.session)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A checkpoint marks a branch's position: checkpoints.services.checkpoint_create makes it.
        return False

    def get_actions(
        self, request: HttpRequest
    ) -> dict[str, tuple[Callable[..., str], str, str] | None]:
        actions = super().get_actions(request)
        # Django's bulk delete would leave the branches' checkpoint counts stale.
        actions.pop("delete_selected", None)
        return actions

    @admin.action(description="Delete selected checkpoints", permissions=["delete"])
    def delete_checkpoints(self, request: HttpRequest, queryset: QuerySet[Checkpoint]) -> None:
        deleted = self._delete_each(queryset)
        self.message_user(
            request,
            ngettext("Deleted %(count)d checkpoint.", "Deleted %(count)d checkpoints.", deleted)
            % {"count": deleted},
            messages.SUCCESS,
        )

    def delete_model(self, request: HttpRequest, obj: Checkpoint) -> None:
        with contextlib.suppress(CheckpointNotFound):  # Already gone: nothing left to do.
            checkpoint_delete(checkpoint=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Checkpoint]) -> None:
        self._delete_each(queryset)

    @staticmethod
    def _delete_each(queryset: QuerySet[Checkpoint]) -> int:
        deleted = 0
        for checkpoint in queryset.select_related(None).only("pk", "branch_id"):
            try:
                checkpoint_delete(checkpoint=checkpoint)
            except CheckpointNotFound:
                continue  # Deleted meanwhile (by a rewind or another admin).
            deleted += 1
        return deleted
