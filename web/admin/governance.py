"""Governance in the admin: a user's session as its branch tree, the messages of a chosen branch
(read-only, escaped), and a restore or rewind of one of its checkpoints on the user's behalf, with
a required reason (governance.services.restore_on_behalf, which writes the AuditRecord). The
records are listed read-only.

Only staff with governance.govern_conversations (or superusers) reach any of it; the pages are
the admin site's own (web.admin_site), wrapped in its admin_view (staff, CSRF, no caching)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from checkpoints.models import Checkpoint
from checkpoints.selectors import rewind_preview, session_checkpoints
from core.errors import DomainError, InvalidInput
from governance.models import REASON_MAX_CHARS, AuditRecord
from governance.selectors import may_govern, records_for_session
from governance.services import clean_reason, restore_on_behalf
from sessions_app.labels import branch_labels
from sessions_app.models import Branch, Message, Session
from sessions_app.selectors import branch_history, parse_pk, session_branches
from web.admin.support import ConversationAdmin, ReadOnlyAdmin
from web.restore_account import restore_account

if TYPE_CHECKING:
    from django.contrib.admin import AdminSite

MESSAGES_SHOWN = 50
CHECKPOINTS_SHOWN = 1000  # of a session, over all its branches; newest first
REASON_PREVIEW = 80


# --- the records ---------------------------------------------------------------------------------


@admin.register(AuditRecord)
class AuditRecordAdmin(ConversationAdmin, ReadOnlyAdmin):
    """Who (the administrator), whom (the user), what (the checkpoint, restored or rewound) and
    why, when; written by governance.services only."""

    list_display = (
        "created_at",
        "actor_name",
        "user",
        "session_link",
        "checkpoint_name",
        "action",
        "reason_preview",
        "acknowledged_at",
    )
    list_select_related = ("user",)
    list_filter = (
        "action",
        ("created_at", admin.DateFieldListFilter),
        ("acknowledged_at", admin.EmptyFieldListFilter),
    )
    search_fields = ("actor_name", "user__username", "checkpoint_name")
    show_full_result_count = False
    fields = readonly_fields = (
        "id",
        "created_at",
        "actor",
        "actor_name",
        "user",
        "session_link",
        "session_ref",
        "checkpoint_ref",
        "checkpoint_name",
        "action",
        "reason",
        "branch_ref",
        "deleted_checkpoints",
        "deleted_messages",
        "deleted_branches",
        "acknowledged_at",
    )

    @admin.display(description="reason")
    def reason_preview(self, obj: AuditRecord) -> str:
        return Truncator(obj.reason).chars(REASON_PREVIEW)

    @admin.display(description="session")
    def session_link(self, obj: AuditRecord) -> str:
        if obj.session_id is None:
            return f"session {obj.session_ref} (deleted)"
        url = reverse("admin:governance_tree", args=[obj.session_id])
        return format_html('<a href="{}">session {}: conversation tree</a>', url, obj.session_id)


# --- the conversation tree -----------------------------------------------------------------------


@dataclass
class TreeNode:
    branch: Branch
    label: str
    checkpoints: list[Checkpoint] = field(default_factory=list)
    children: list[TreeNode] = field(default_factory=list)


def conversation_tree(session: Session) -> tuple[list[TreeNode], dict[int, TreeNode]]:
    """The session's branches as a tree (roots first, oldest first), each with its checkpoints
    (newest first, at most CHECKPOINTS_SHOWN over the session): two queries."""
    branches = list(session_branches(session).select_related("forked_from"))
    labels = branch_labels(branches)
    nodes = {b.pk: TreeNode(branch=b, label=labels[b.pk]) for b in branches}
    for checkpoint in session_checkpoints(session)[:CHECKPOINTS_SHOWN]:
        node = nodes.get(checkpoint.branch_id)
        if node is not None:
            node.checkpoints.append(checkpoint)
    roots: list[TreeNode] = []
    for b in branches:
        parent = nodes.get(b.parent_id) if b.parent_id is not None else None
        (parent.children if parent is not None else roots).append(nodes[b.pk])
    return roots, nodes


class RestoreForm(forms.Form):
    checkpoint = forms.IntegerField(widget=forms.HiddenInput, min_value=1)
    mode = forms.ChoiceField(
        choices=[
            ("branch", "Restore as a new branch (nothing is deleted)"),
            ("rewind", "Rewind its branch to it (what comes after is deleted)"),
        ],
        widget=forms.RadioSelect,
        initial="branch",
    )
    scope = forms.ChoiceField(
        choices=[
            ("all", "Conversation and files"),
            ("conversation", "Conversation only (the files stay as they are now)"),
            ("files", "Files only (the conversation stays; nothing is deleted)"),
        ],
        widget=forms.RadioSelect,
        initial="all",
        required=False,
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "maxlength": REASON_MAX_CHARS}),
        max_length=REASON_MAX_CHARS,
        strip=True,
        help_text="Required. The user sees it, with the date, on their chat page.",
    )

    def clean_reason(self) -> str:
        try:
            return clean_reason(self.cleaned_data.get("reason"))
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message) from None


def _session(pk: int) -> Session:
    found = Session.objects.select_related("owner").filter(pk=pk).first()
    if found is None:
        raise Http404("No such session.")
    return found


def _chosen_branch(nodes: dict[int, TreeNode], value: Any) -> TreeNode:
    key = parse_pk(value) if value is not None else None
    if key is not None and key in nodes:
        return nodes[key]
    current = next((n for n in nodes.values() if n.branch.is_current), None)
    if current is None:  # a session always has a current branch; the first one otherwise
        current = next(iter(nodes.values()))
    return current


def _chosen_checkpoint(session: Session, value: Any) -> Checkpoint | None:
    key = parse_pk(value) if value is not None else None
    if key is None:
        return None
    return (
        Checkpoint.objects.select_related("branch").filter(pk=key, branch__session=session).first()
    )


def tree_view(request: HttpRequest, pk: int, *, site: AdminSite) -> HttpResponse:
    """GET: the tree, a branch's last messages (?branch=) and, with ?checkpoint=, the restore
    form for that checkpoint. POST: the restore (or rewind), then back to the tree."""
    if not may_govern(request.user):
        raise PermissionDenied
    session = _session(pk)
    checkpoint: Checkpoint | None
    if request.method == "POST":
        form = RestoreForm(request.POST)
        if form.is_valid():
            checkpoint = _chosen_checkpoint(session, form.cleaned_data["checkpoint"])
            if checkpoint is None:
                form.add_error(None, "That checkpoint is not in this conversation.")
            else:
                try:
                    record = restore_on_behalf(
                        actor=request.user,
                        checkpoint=checkpoint,
                        mode=form.cleaned_data["mode"],
                        scope=form.cleaned_data["scope"] or "all",
                        reason=form.cleaned_data["reason"],
                        session=session,
                    )
                except DomainError as exc:
                    form.add_error(None, exc.message)
                else:
                    messages.success(
                        request,
                        f"Done, on the record: checkpoint “{record.checkpoint_name}” "
                        f"{record.get_action_display()} ({record.get_scope_display()}) "
                        f"for {session.owner.get_username()}.",
                    )
                    url = reverse("admin:governance_tree", args=[session.pk], current_app=site.name)
                    return HttpResponseRedirect(f"{url}?branch={record.branch_ref}")
        checkpoint = _chosen_checkpoint(session, request.POST.get("checkpoint"))
        status = 400
    elif request.method in ("GET", "HEAD"):
        checkpoint = _chosen_checkpoint(session, request.GET.get("checkpoint"))
        form = RestoreForm(initial={"checkpoint": checkpoint.pk}) if checkpoint else RestoreForm()
        status = 200
    else:
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD, POST"})
    roots, nodes = conversation_tree(session)
    chosen = _chosen_branch(nodes, request.GET.get("branch"))
    start = max(0, chosen.branch.message_count - MESSAGES_SHOWN)
    history: list[Message] = branch_history(chosen.branch, start=start)
    context: dict[str, Any] = {
        **site.each_context(request),
        "title": f"Conversation tree: {session.session_name}",
        "session": session,
        "owner": session.owner,
        "roots": roots,
        "chosen": chosen,
        "history": history,
        "history_start": start,
        "checkpoint": checkpoint,
        "checkpoint_branch": nodes[checkpoint.branch_id].label if checkpoint else "",
        "preview": rewind_preview(checkpoint) if checkpoint else None,
        # What comes back and what no restore can undo, as the user's own dialog says it.
        **(restore_account(checkpoint, session) if checkpoint else {}),
        "form": form,
        "reason_max": REASON_MAX_CHARS,
        "records": records_for_session(session)[:10],
        "session_admin_url": reverse(
            "admin:sessions_app_session_change", args=[session.pk], current_app=site.name
        ),
        "opts": Session._meta,
    }
    request.current_app = site.name
    return TemplateResponse(request, "admin/governance/tree.html", context, status=status)
