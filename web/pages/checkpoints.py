"""The checkpoint panel (HTML, htmx): the list (filtered, a page at a time), save, details,
delete, restore."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from checkpoints.selectors import get_checkpoint_for_user, rewind_preview
from checkpoints.services import checkpoint_create, checkpoint_delete, checkpoint_restore
from core.errors import InvalidInput
from core.http import domain_errors
from sessions_app.labels import branch_label
from sessions_app.models import Session
from sessions_app.selectors import current_branch, get_session_for_user
from sessions_app.services import branch_activate
from web import chat_state as pages
from web.pages.live import refresh
from web.pages.tabs import answers_with_new_state
from web.restore_account import restore_account


def _number(value: str | None, what: str) -> int | None:
    if value is None or value == "":
        return None
    if not value.isdigit() or len(value) > 12:
        raise InvalidInput(f"{what} must be a whole number.")
    return int(value)


@login_required
@require_GET
@domain_errors
def checkpoint_list(request: HttpRequest, pk: int) -> HttpResponse:
    """A page of the panel's checkpoints: `kind` (all, manual, auto) and `scope` (all, branch)
    filter; `before` (a checkpoint id) asks for those older than it. Without `before`, the first
    `shown` (at least a page) are listed: a live update lists as many as the reader had."""
    session = get_session_for_user(request.user, pk)
    chosen = pages.CheckpointFilter.parse(request.GET)
    before = _number(request.GET.get("before"), "before")
    shown = _number(request.GET.get("shown"), "shown") or 0
    if before is None:
        page = pages.checkpoint_page(
            session, chosen=chosen, count=max(shown, pages.CHECKPOINT_PAGE)
        )
    else:
        page = pages.checkpoint_page(session, chosen=chosen, before=before, shown=shown)
    return render(request, "checkpoints/_checkpoint_page.html", {**page, "older_page": before})


@login_required
@require_POST
@domain_errors
@answers_with_new_state
def save(request: HttpRequest, pk: int) -> HttpResponse:
    """Save a checkpoint of the current branch: the form says so, and the page shows it (its
    marker, the panel) in the same answer."""
    session = get_session_for_user(request.user, pk)
    saved = checkpoint_create(
        branch=current_branch(session),
        name=request.POST.get("name") or None,
        description=request.POST.get("description", ""),
        metadata={"trigger": "manual"},
    )
    context = {"session": session, "saved": saved}
    return refresh(
        request, session, render_to_string("checkpoints/_save_form.html", context, request)
    )


@login_required
@require_GET
@domain_errors
def detail(request: HttpRequest, cp_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request.user, cp_id)
    context = {"cp": checkpoint, "branch_label": branch_label(checkpoint.branch)}
    return render(request, "checkpoints/_detail.html", context)


@login_required
@require_POST
@domain_errors
@answers_with_new_state
def delete(request: HttpRequest, cp_id: int) -> HttpResponse:
    """Delete a checkpoint: the answer is the page's refresh, with its marker gone wherever it
    is loaded (markers.js, from the #live-refresh it names it on; nothing is fetched)."""
    checkpoint = get_checkpoint_for_user(request.user, cp_id)
    session = checkpoint.branch.session
    gone = checkpoint.pk
    checkpoint_delete(checkpoint=checkpoint)
    return refresh(request, session, _gone(request, session, [gone]))


def _gone(request: HttpRequest, session: Session, checkpoints: list[int]) -> str:
    """The markers of checkpoints this tab's own change deleted go wherever they are loaded
    (markers.js reads them from #live-refresh, which fetches nothing here)."""
    if not checkpoints:
        return ""
    event = {"type": "checkpoint.deleted", "checkpoints": checkpoints}
    context = {"session_id": session.pk, "event": event, "fetch": False}
    return render_to_string("sessions_app/_live_refresh.html", context, request)


@login_required
@require_POST
@domain_errors
def show_on_branch(request: HttpRequest, cp_id: int) -> HttpResponse:
    """A checkpoint on another branch than the one shown ("Show in conversation"): make its
    branch current, then show the checkpoint in its place there."""
    checkpoint = get_checkpoint_for_user(request.user, cp_id)
    branch_activate(branch=checkpoint.branch)
    page = reverse("chat:session", args=[checkpoint.branch.session_id])
    return redirect(f"{page}?checkpoint={checkpoint.pk}")


@login_required
@require_http_methods(["GET", "POST"])
@domain_errors
@answers_with_new_state
def restore(request: HttpRequest, cp_id: int) -> HttpResponse:
    """GET: the confirmation dialog; POST: restore as a new branch (default) or rewind, the
    conversation and the files (`scope` "all", the default), or one of them."""
    checkpoint = get_checkpoint_for_user(request.user, cp_id)
    session = checkpoint.branch.session
    if request.method == "GET":
        context = {
            "cp": checkpoint,
            "preview": rewind_preview(checkpoint),
            "branch_label": branch_label(checkpoint.branch),
            **restore_account(checkpoint, session),
        }
        return render(request, "checkpoints/_restore_dialog.html", context)
    result = checkpoint_restore(
        checkpoint=checkpoint,
        mode=request.POST.get("mode", "branch"),
        scope=request.POST.get("scope", "all"),
        session=session,
    )
    # Close this tab's dialog; other tabs get the change over their socket, dialogs untouched.
    # A rewind's deleted checkpoints leave this tab's markers as they leave the others'.
    return refresh(
        request,
        session,
        '<div id="dialogs" hx-swap-oob="true"></div>'
        + _gone(request, session, [cp.id for cp in result.deleted_checkpoints]),
    )
