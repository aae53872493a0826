"""Admin console for users, with how many sessions, branches and checkpoints each one has."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.contrib.auth.forms import UserChangeForm as BaseUserChangeForm

from checkpoints.models import Checkpoint
from sessions_app.admin import changelist_link, count_subquery, deletion_summary
from sessions_app.errors import InvalidInput
from sessions_app.models import ExternalSession, InternalSession
from sessions_app.validation import clean_json_object

from .models import User


class UserChangeForm(BaseUserChangeForm):
    class Meta(BaseUserChangeForm.Meta):
        model = User

    def clean_metadata(self):
        try:
            return clean_json_object(self.cleaned_data.get("metadata"), what="user metadata")
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message) from None


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    form = UserChangeForm
    fieldsets = (*BaseUserAdmin.fieldsets, ("Metadata", {"fields": ("metadata",)}))
    list_display = (
        "username",
        "email",
        "is_staff",
        "date_joined",
        "session_count",
        "branch_count",
        "checkpoint_count",
    )

    def get_queryset(self, request):
        # One correlated subquery per count: joining the three tables and counting distinct ids
        # would multiply the rows (sessions x branches x checkpoints) before counting.
        return (
            super()
            .get_queryset(request)
            .annotate(
                session_count=count_subquery(ExternalSession.objects.all(), "owner"),
                branch_count=count_subquery(InternalSession.objects.all(), "session__owner"),
                checkpoint_count=count_subquery(Checkpoint.objects.all(), "branch__session__owner"),
            )
        )

    @admin.display(description="sessions", ordering="session_count")
    def session_count(self, obj):
        return changelist_link(ExternalSession, f"owner={obj.pk}", obj.session_count)

    @admin.display(description="branches", ordering="branch_count")
    def branch_count(self, obj):
        return changelist_link(InternalSession, f"owner={obj.pk}", obj.branch_count)

    @admin.display(description="checkpoints", ordering="checkpoint_count")
    def checkpoint_count(self, obj):
        return changelist_link(Checkpoint, f"owner={obj.pk}", obj.checkpoint_count)

    def get_deleted_objects(self, objs, request):
        pks = [obj.pk for obj in objs]
        return deletion_summary(request, objs, ExternalSession.objects.filter(owner__in=pks))
