"""What the admin pages share: links, counts as subqueries, the owner filter, the deletion
summary and read-only inlines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.auth import get_user_model
from django.db.models import (
    BigIntegerField,
    Count,
    IntegerField,
    Model,
    OuterRef,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import capfirst

from checkpoints.models import Checkpoint
from core.errors import InvalidInput
from core.validation import JSON_MAX_DEPTH, clean_metadata, clean_name, clean_session_state
from governance.selectors import may_govern
from sessions_app.models import Branch, LedgerEntry, Message, Session


def admin_link(obj: Model, text: str | None = None) -> str:
    """An escaped link to `obj`'s change page in the admin."""
    opts = obj._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, obj if text is None else text)


def changelist_link(model: type[Model], query: str, text: object) -> str:
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    return format_html('<a href="{}?{}">{}</a>', url, query, text)


def count_subquery(queryset: QuerySet[Model], outer_field: str) -> Coalesce:
    """COUNT(*) of `queryset` rows whose `outer_field` is the outer row, as a correlated subquery:
    one number per row, never a join that multiplies the outer rows."""
    counted = (
        queryset.filter(**{outer_field: OuterRef("pk")})
        .order_by()
        .values(outer_field)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def sum_subquery(queryset: QuerySet[Model], outer_field: str, field: str) -> Coalesce:
    """SUM(`field`) of `queryset` rows whose `outer_field` is the outer row, as a correlated
    subquery (0 when there is none), like count_subquery."""
    summed = (
        queryset.filter(**{outer_field: OuterRef("pk")})
        .order_by()
        .values(outer_field)
        .annotate(total=Sum(field))
        .values("total")
    )
    return Coalesce(Subquery(summed, output_field=BigIntegerField()), Value(0))


class JSONFormField(forms.JSONField):
    """Django's JSON form field, refusing JSON nested too deeply for Python's parser (a form
    error, not a 500). The form's clean methods then hold the value to the services' limits."""

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except RecursionError:
            raise forms.ValidationError(
                f"This JSON is nested more than {JSON_MAX_DEPTH} levels deep."
            ) from None

    def bound_data(self, data: Any, initial: Any) -> Any:
        if self.disabled or data is None:
            return super().bound_data(data, initial)
        # A form sent back with errors shows the JSON exactly as it was typed: Django would parse
        # and re-encode it, and a value that is refused (too deep, a lone surrogate) cannot be
        # shown that way.
        return forms.fields.InvalidJSONInput(data)


def form_metadata(value: Any, what: str) -> dict[str, Any]:
    try:
        return clean_metadata(value, what=what)
    except InvalidInput as exc:
        raise forms.ValidationError(exc.message) from None


def form_session_state(value: Any) -> dict[str, Any]:
    try:
        return clean_session_state(value)
    except InvalidInput as exc:
        raise forms.ValidationError(exc.message) from None


def form_name(value: Any, what: str) -> str:
    try:
        return clean_name(value, what=what)
    except InvalidInput as exc:
        raise forms.ValidationError(exc.message) from None


def _positive_int(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if 0 < number < 2**63 else None


class ChosenFilter(admin.SimpleListFilter):
    """A filter by one related object's id that never loads every object: the only choice
    listed is the one chosen (followed from a link, or `?<parameter>=<id>` in the address)."""

    def related(self) -> str:
        """The path to the related object's id, less its `_id`."""
        raise NotImplementedError

    def label(self, pk: int | None, value: str) -> str:
        raise NotImplementedError

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        value = self.value()
        if value is None:
            return []
        return [(value, self.label(_positive_int(value), value))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Model]) -> QuerySet[Model]:
        value = self.value()
        if value is None:
            return queryset
        pk = _positive_int(value)
        if pk is None:
            raise IncorrectLookupParameters(f"Unknown {self.title} {value!r}.")
        return queryset.filter(**{f"{self.related()}_id": pk})


class OwnerFilter(ChosenFilter):
    """Filter by owner without loading every user (follow a count in the user list, or add
    ?owner=<user id> to the address)."""

    title = "owner"
    parameter_name = "owner"
    owner_path = "owner"

    def related(self) -> str:
        return self.owner_path

    def label(self, pk: int | None, value: str) -> str:
        user = get_user_model().objects.filter(pk=pk).first() if pk else None
        return user.get_username() if user else f"user {value}"


class SessionOwnerFilter(OwnerFilter):
    owner_path = "session__owner"


def deletion_summary(
    request: HttpRequest,
    objs: Sequence[Model] | QuerySet[Model],
    sessions: QuerySet[Session],
) -> tuple[list[str], dict[str, int], set[str], list[str]]:
    """What deleting `objs` takes with it, counted in a few queries instead of loading every
    message (Django's default lists each related row, and refuses because messages and branches
    are read-only here). `sessions`: a queryset of the sessions deleted with `objs` (or `objs`)."""
    objs = list(objs)
    counts: list[tuple[type[Model], int]] = []
    if objs and not isinstance(objs[0], Session):
        counts.append((type(objs[0]), len(objs)))
    counts += [
        (Session, sessions.count()),
        (Branch, Branch.objects.filter(session__in=sessions).count()),
        (Message, Message.objects.filter(branch__session__in=sessions).count()),
        (Checkpoint, Checkpoint.objects.filter(branch__session__in=sessions).count()),
        # The only deletion that takes the effects ledger's entries (sessions_app.models.ledger).
        (LedgerEntry, LedgerEntry.objects.filter(session__in=sessions).count()),
    ]
    model_count: dict[str, int] = {}
    perms_needed: set[str] = set()
    for model, count in counts:
        if not count:
            continue
        opts = model._meta
        model_count[str(opts.verbose_name_plural)] = count
        if not request.user.has_perm(f"{opts.app_label}.delete_{opts.model_name}"):
            perms_needed.add(str(opts.verbose_name))
    deleted: list[str] = [
        format_html("{}: {}", capfirst(obj._meta.verbose_name), admin_link(obj)) for obj in objs
    ]
    return deleted, model_count, perms_needed, []


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows the services write: the console shows them and changes nothing."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInlineMixin:
    """An inline that only shows rows: no add, no change, no delete."""

    extra: int = 0
    max_num: int | None = 0
    can_delete: bool = False

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class ConversationAdmin(admin.ModelAdmin):
    """An admin of users' conversations (sessions, branches, messages, turns, summaries,
    checkpoints, memories): shown only to staff with the dedicated permission
    (governance.govern_conversations; superusers have it), on top of Django's model permissions.
    A staff user without it sees nothing of users' conversations: not the app index entries, not
    the lists, not a change page (403), not a search."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return may_govern(request.user) and super().has_module_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_govern(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_govern(request.user) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_govern(request.user) and super().has_delete_permission(request, obj)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return may_govern(request.user) and super().has_add_permission(request, *args)
