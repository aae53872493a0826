"""The checkpoint panel (HTML, htmx): save, details, delete, restore."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from checkpoints.selectors import get_checkpoint_for_user, rewind_preview
from checkpoints.services import checkpoint_create, checkpoint_delete, checkpoint_restore
from core.http import domain_errors
from sessions_app.labels import branch_label
from sessions_app.models import ExternalSession
from sessions_app.selectors import current_branch, get_session_for_user
from web import context as pages
from web.pages.chat import refresh


def _panel(request: HttpRequest, session: ExternalSession) -> HttpResponse:
    return render(request, "checkpoints/_panel.html", pages.panel(session))


@login_required
@require_POST
@domain_errors
def save(request: HttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    checkpoint_create(
        branch=current_branch(session),
        name=request.POST.get("name") or None,
        description=request.POST.get("description", ""),
        metadata={"trigger": "manual"},
    )
    return _panel(request, session)


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
def delete(request: HttpRequest, cp_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request.user, cp_id)
    session = checkpoint.branch.session
    checkpoint_delete(checkpoint=checkpoint)
    return _panel(request, session)


@login_required
@require_http_methods(["GET", "POST"])
@domain_errors
def restore(request: HttpRequest, cp_id: int) -> HttpResponse:
    """GET: the confirmation dialog; POST: restore as a new branch (default) or rewind."""
    checkpoint = get_checkpoint_for_user(request.user, cp_id)
    session = checkpoint.branch.session
    if request.method == "GET":
        context = {
            "cp": checkpoint,
            "preview": rewind_preview(checkpoint),
            "branch_label": branch_label(checkpoint.branch),
        }
        return render(request, "checkpoints/_restore_dialog.html", context)
    checkpoint_restore(
        checkpoint=checkpoint, mode=request.POST.get("mode", "branch"), session=session
    )
    response = refresh(request, session)
    # Close this tab's dialog; other tabs get the change over their socket, dialogs untouched.
    response.content += b'<div id="dialogs" hx-swap-oob="true"></div>'
    return response
