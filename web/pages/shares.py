"""The owner's side of share links: the Share dialog of a branch (in the chat's branch tree),
and the list on the profile with Delete. The public page is web/pages/shared.py."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from access.errors import AccessDenied
from accounts.models import User
from checkpoints.models import Checkpoint
from checkpoints.selectors import get_checkpoint_for_user, lineage_checkpoints
from core.errors import Conflict, InvalidInput
from core.http import HtmxHttpRequest, domain_errors
from sessions_app.labels import branch_label
from sessions_app.models import Branch
from sessions_app.selectors import get_branch_for_user, parse_pk
from sharing.models import ShareLink
from sharing.selectors import share_labels, shares_for_user, shown_counts
from sharing.services import share_create, share_delete
from web.share_links import share_url, shared_url

# Checkpoints offered in the dialog (newest first), and links listed on the profile.
DIALOG_CHECKPOINTS = 100
PROFILE_SHARES_SHOWN = 100


def _user(request: HttpRequest) -> User:
    user = request.user
    assert isinstance(user, User)  # noqa: S101 - login_required let only users in
    return user


def _dialog(
    request: HttpRequest,
    branch: Branch,
    *,
    chosen: str = "",
    error: str = "",
    share: ShareLink | None = None,
    url: str = "",
) -> HttpResponse:
    checkpoints: list[Checkpoint] = []
    if share is None:
        checkpoints = list(lineage_checkpoints(branch)[:DIALOG_CHECKPOINTS])
    context = {
        "branch": branch,
        "label": branch_label(branch),
        "checkpoints": checkpoints,
        "chosen": chosen,
        "error": error,
        "share": share,
        "url": url,
    }
    # A refusal comes back in the open dialog with its reason (200: the page's dialogs close
    # on an error status).
    return render(request, "sharing/_share_dialog.html", context)


@login_required
@require_http_methods(["GET", "POST"])
@domain_errors
def share_dialog(request: HtmxHttpRequest, branch_id: int) -> HttpResponse:
    """GET: the Share dialog of a branch (the whole branch, or up to one of the checkpoints
    of its history). POST: make the link; the dialog shows its address to copy."""
    user = _user(request)
    branch = get_branch_for_user(user, branch_id)
    if request.method == "GET":
        return _dialog(request, branch)
    chosen = request.POST.get("checkpoint", "")
    checkpoint = None
    if chosen:
        if parse_pk(chosen) is None:
            error = "Choose the whole branch or one of its checkpoints."
            return _dialog(request, branch, error=error)
        checkpoint = get_checkpoint_for_user(user, chosen)
    try:
        share, token = share_create(owner=user, branch=branch, checkpoint=checkpoint)
    except (InvalidInput, Conflict, AccessDenied) as exc:
        return _dialog(request, branch, chosen=chosen, error=exc.people)
    return _dialog(request, branch, share=share, url=shared_url(request, token))


@login_required
@require_POST
@domain_errors
def share_remove(request: HtmxHttpRequest, share_id: int) -> HttpResponse:
    """Delete a link from the profile's list: its address is a 404 from now on."""
    share_delete(owner=_user(request), share_id=share_id)
    messages.success(request, "The share link is deleted: its address no longer opens anything.")
    response = HttpResponseRedirect(reverse("accounts:profile") + "#shares")
    response.status_code = 303
    return response


def profile_shares(request: HttpRequest, user: User) -> dict[str, Any]:
    """The profile's list of the user's links (the newest PROFILE_SHARES_SHOWN): what each
    shows, its address, when it was made, how often it was opened."""
    listed = shares_for_user(user)
    shares = list(listed[:PROFILE_SHARES_SHOWN])
    labels = share_labels(shares)
    shown = shown_counts(shares)
    rows = [
        {
            "share": share,
            "label": labels.get(share.pk, ""),
            "url": share_url(request, share),
            "shown": shown[share.pk],  # fewer than shared once a rewind cut its branch
        }
        for share in shares
    ]
    total = len(shares) if len(shares) < PROFILE_SHARES_SHOWN else listed.count()
    return {"shares": rows, "shares_more": total - len(rows)}
