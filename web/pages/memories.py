"""The memories page: the user's memories (newest first, or ranked by a search), a form to add
one, each editable and deletable. Memories belong to the user, not to a conversation: restoring
or rewinding one does not erase them (the page says so)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.models import User
from core.errors import DomainError, InvalidInput
from core.http import domain_errors
from core.validation import clean_search
from memories.models import KEY_MAX_LENGTH, L0_MAX_LENGTH, L1_MAX_LENGTH, Category
from memories.selectors import get_memory_for_user, memories_listed
from memories.services import memory_create, memory_delete, memory_update
from web.pages.forms import add_domain_error

MEMORIES_SHOWN = 200


class MemoryForm(forms.Form):
    # Lengths and content are checked by the memory service; the sizes here only help the
    # browser. Errors come back beside their fields.
    key = forms.CharField(
        max_length=KEY_MAX_LENGTH,
        help_text="A short identifier: letters, digits, _ . and -, e.g. editor.",
        strip=False,
    )
    category = forms.ChoiceField(choices=Category.choices, initial=Category.PROJECT)
    l0_abstract = forms.CharField(label="Summary (one line)", max_length=L0_MAX_LENGTH, strip=False)
    l1_overview = forms.CharField(
        label="Overview (two or three sentences)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "maxlength": L1_MAX_LENGTH}),
    )
    l2_details = forms.CharField(
        label="Details (Markdown)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 6}),
    )
    confidence = forms.FloatField(min_value=0.0, max_value=1.0, initial=1.0)


def _user(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User):  # login_required lets only users in
        raise PermissionDenied
    return user


def _page(
    request: HttpRequest, form: MemoryForm | None = None, *, status: int = 200
) -> HttpResponse:
    try:
        query = clean_search(request.GET.get("q"))
    except InvalidInput as exc:
        messages.error(request, exc.people)
        query = ""
    listed = list(memories_listed(request.user, query=query)[:MEMORIES_SHOWN])
    context: dict[str, Any] = {
        "memories": listed,
        "query": query,
        "form": form or MemoryForm(),
        "shown": MEMORIES_SHOWN,
    }
    return render(request, "memories/list.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def memory_list(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _page(request)
    form = MemoryForm(request.POST)
    if form.is_valid():
        try:
            memory = memory_create(user=_user(request), **form.cleaned_data)
        except DomainError as exc:
            add_domain_error(form, exc)
        else:
            messages.success(request, f"Memory “{memory.key}” saved.")
            return redirect("memories:list")
    return _page(request, form, status=400)


@login_required
@require_http_methods(["GET", "POST"])
@domain_errors
def memory_edit(request: HttpRequest, pk: int) -> HttpResponse:
    memory = get_memory_for_user(request.user, pk)
    status = 200
    if request.method == "POST":
        form = MemoryForm(request.POST)
        if form.is_valid():
            try:
                memory = memory_update(memory=memory, **form.cleaned_data)
            except DomainError as exc:
                if exc.code == "not_found":
                    raise
                add_domain_error(form, exc)
            else:
                messages.success(request, f"Memory “{memory.key}” saved.")
                return redirect("memories:list")
        status = 400
    else:
        form = MemoryForm(
            initial={
                "key": memory.key,
                "category": memory.category,
                "l0_abstract": memory.l0_abstract,
                "l1_overview": memory.l1_overview,
                "l2_details": memory.l2_details,
                "confidence": memory.confidence,
            }
        )
    return render(request, "memories/edit.html", {"memory": memory, "form": form}, status=status)


@login_required
@require_POST
@domain_errors
def memory_delete_view(request: HttpRequest, pk: int) -> HttpResponse:
    memory = get_memory_for_user(request.user, pk)
    memory_delete(memory=memory)
    messages.success(request, f"Memory “{memory.key}” deleted.")
    return redirect("memories:list")
