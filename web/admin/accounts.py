"""Admin console for users, with how many sessions, branches and checkpoints each one has."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.contrib.auth.forms import AdminPasswordChangeForm
from django.contrib.auth.forms import UserChangeForm as BaseUserChangeForm
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from accounts.models import ApiKey, SiteSettings, User
from accounts.services import apikey_revoke, user_deactivate, user_password_set
from checkpoints.models import Checkpoint
from core.errors import InvalidInput
from core.validation import clean_json_object
from ops.approvals import accounts_approve, accounts_refuse
from ops.audit import Who
from ops.erasure import user_delete, user_erase, user_holdings
from ops.models import AuditRecord
from sessions_app.models import Branch, Message, Session
from web.admin.support import changelist_link, count_subquery, deletion_summary

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _UserCounts(TypedDict):
    """What `UserAdmin.get_queryset` annotates on each user."""

    session_count: int
    branch_count: int
    checkpoint_count: int


class UserChangeForm(BaseUserChangeForm):
    class Meta(BaseUserChangeForm.Meta):
        model = User

    def clean_metadata(self) -> dict[str, Any]:
        try:
            return clean_json_object(self.cleaned_data.get("metadata"), what="user metadata")
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message) from None


class PasswordChangeForm(AdminPasswordChangeForm):
    """The admin's "change password" form, saving through the service, so the user's browser
    logins end with their sockets. (When admins change their own password here, Django keeps
    this login signed in, but the form does not know the login: its sockets close too.)"""

    # Django's forms save through this method (SetPasswordMixin); django-stubs do not list it.
    def set_password_and_save(
        self,
        user: User,
        password_field_name: str = "password1",  # noqa: S107 - the name of a form field
        commit: bool = True,
    ) -> User:
        usable = self.cleaned_data["set_usable_password"]
        password = self.cleaned_data[password_field_name] if usable else None
        if not commit:  # as Django's: set, not saved; the caller saves, and nothing closes
            if password is None:
                user.set_unusable_password()
            else:
                user.set_password(password)
            return user
        return user_password_set(user=user, password=password)


def _staff(request: HttpRequest) -> User:
    if not isinstance(request.user, User):  # the admin lets only staff users in
        raise PermissionDenied
    return request.user


def _decided(record: AuditRecord, verb: str) -> str:
    """What an approval or a refusal did, for the admin's message."""
    left = record.details.get("left", 0) if isinstance(record.details, dict) else 0
    said = f"{record.affected} account{'' if record.affected == 1 else 's'} {verb}"
    if left:
        said += f"; {left} left as {'it was' if left == 1 else 'they were'} (already decided)"
    return f"{said} (audit record {record.pk})."


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    form = UserChangeForm
    change_password_form = PasswordChangeForm
    # The stubs allow None for `fieldsets`; Django's UserAdmin always sets it.
    fieldsets = (
        *(BaseUserAdmin.fieldsets or ()),
        ("Approval", {"fields": ("approval", "approval_decided_at")}),
        ("Metadata", {"fields": ("metadata",)}),
    )
    readonly_fields = ("approval", "approval_decided_at")
    list_display = (
        "username",
        "email",
        "approval",
        "is_staff",
        "date_joined",
        "session_count",
        "branch_count",
        "checkpoint_count",
        "message_link",
    )

    list_filter = ("approval", *BaseUserAdmin.list_filter)
    actions = ("approve", "refuse", "deactivate", "erase")

    def save_model(
        self, request: HttpRequest, obj: User, form: forms.ModelForm, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        if change and "is_active" in form.changed_data and not obj.is_active:
            user_deactivate(user=obj)  # closes their open sockets
        if obj.is_active and obj.approval != User.Approval.APPROVED:
            # Turned on by hand while it waited: that is an approval, recorded as one.
            accounts_approve(user_ids=[obj.pk], who=Who.admin(_staff(request)))

    @admin.action(description="Approve the selected accounts", permissions=["change"])
    def approve(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        ids = list(queryset.values_list("pk", flat=True))
        record = accounts_approve(user_ids=ids, who=Who.admin(_staff(request)))
        self.message_user(request, _decided(record, "approved"), messages.SUCCESS)

    @admin.action(description="Refuse the selected accounts that wait", permissions=["change"])
    def refuse(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        ids = list(queryset.values_list("pk", flat=True))
        record = accounts_refuse(user_ids=ids, who=Who.admin(_staff(request)))
        self.message_user(request, _decided(record, "refused"), messages.SUCCESS)

    def delete_model(self, request: HttpRequest, obj: User) -> None:
        user_delete(user=obj)  # in the lock order of every write, not a plain cascade

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset.order_by("pk"):
            user_delete(user=user)

    @admin.action(description="Deactivate the selected users", permissions=["change"])
    def deactivate(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset:
            user_deactivate(user=user)
        self.message_user(
            request, "The selected users are deactivated and signed out.", messages.SUCCESS
        )

    @admin.action(
        description="Erase the selected users completely (asks first)", permissions=["delete"]
    )
    def erase(self, request: HttpRequest, queryset: QuerySet[User]) -> HttpResponse | None:
        """A confirmation page that counts what goes, then the erasure of each user (never of
        the staff user doing it): every row of theirs, in every table (ops.erasure)."""
        users = [user for user in queryset if user.pk != request.user.pk]
        if len(users) < len(queryset):
            self.message_user(
                request, "You cannot erase yourself: you were left out.", messages.WARNING
            )
        if not users:
            return None
        if request.POST.get("confirmed") == "yes":
            if not isinstance(request.user, User):  # the admin lets only staff users in
                raise PermissionDenied
            for user in users:
                record = user_erase(user=user, who=Who.admin(request.user))
                self.message_user(
                    request,
                    f"User {record.parameters['user']} is erased: {record.affected} rows deleted "
                    f"(audit record {record.pk}).",
                    messages.SUCCESS,
                )
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Erase these users completely?",
            "opts": self.model._meta,
            "users": [(user, user_holdings(user)) for user in users],
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/ops/erase_confirmation.html", context)

    def get_queryset(self, request: HttpRequest) -> QuerySet[User]:
        # One correlated subquery per count: joining the three tables and counting distinct ids
        # would multiply the rows (sessions x branches x checkpoints) before counting.
        users: QuerySet[User] = super().get_queryset(request)
        return users.annotate(
            session_count=count_subquery(Session.objects.all(), "owner"),
            branch_count=count_subquery(Branch.objects.all(), "session__owner"),
            checkpoint_count=count_subquery(Checkpoint.objects.all(), "branch__session__owner"),
        )

    @admin.display(description="sessions", ordering="session_count")
    def session_count(self, obj: WithAnnotations[User, _UserCounts]) -> str:
        return changelist_link(Session, f"owner={obj.pk}", obj.session_count)

    @admin.display(description="branches", ordering="branch_count")
    def branch_count(self, obj: WithAnnotations[User, _UserCounts]) -> str:
        return changelist_link(Branch, f"owner={obj.pk}", obj.branch_count)

    @admin.display(description="checkpoints", ordering="checkpoint_count")
    def checkpoint_count(self, obj: WithAnnotations[User, _UserCounts]) -> str:
        return changelist_link(Checkpoint, f"owner={obj.pk}", obj.checkpoint_count)

    @admin.display(description="messages")
    def message_link(self, obj: User) -> str:
        # No count: it would read every message of the user on each page of the list.
        return changelist_link(Message, f"owner={obj.pk}", "messages")

    def get_deleted_objects(
        self, objs: Sequence[User] | QuerySet[User], request: HttpRequest
    ) -> tuple[list[str], dict[str, int], set[str], list[str]]:
        pks = [obj.pk for obj in objs]
        return deletion_summary(request, objs, Session.objects.filter(owner__in=pks))


@admin.register(SiteSettings)
class SiteSettingsAdmin(admin.ModelAdmin):
    list_display = ("__str__", "signup_open")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and not SiteSettings.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: SiteSettings | None = None) -> bool:
        return False


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are made by their owners (the secret is shown to them only); the admin sees them and
    can revoke them."""

    list_display = ("name", "user", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    list_select_related = ("user",)
    search_fields = ("name", "prefix", "user__username")
    readonly_fields = (
        "user",
        "name",
        "prefix",
        "key_hash",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    actions = ("revoke",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke the selected API keys", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset.select_related("user"):
            apikey_revoke(user=key.user, key_id=key.pk)
        self.message_user(request, "The selected API keys are revoked.", messages.SUCCESS)
