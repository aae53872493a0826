"""Another branch of a session read in place, at its own address, without switching to it
(`chat:branch_read`), and its "Continue here", which makes it the current branch
(`chat:branch_continue`). Reading changes nothing, for this tab or any other; only Continue
here moves the current branch (for every tab, as any switch does)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.http import HtmxHttpRequest, domain_errors
from sessions_app.errors import BranchNotFound
from sessions_app.models import Branch, Session
from sessions_app.selectors import get_branch_for_user, get_session_for_user, parse_pk
from sessions_app.services import branch_activate
from web.pages.session_list import sidebar
from web.reading import branch_reading, page_position


def _session_branch(request: HtmxHttpRequest, pk: int, branch_id: int) -> tuple[Session, Branch]:
    """The user's session `pk` and its branch `branch_id`; either another user's, missing, or
    the branch another session's: 404."""
    session = get_session_for_user(request.user, pk)
    branch = get_branch_for_user(request.user, branch_id)
    if branch.session_id != session.pk:
        raise BranchNotFound()
    return session, branch


def _point(data: QueryDict) -> str:
    """The point a page looks for (`message` or `checkpoint`, an id), as a query string ("" for
    none), so the chat page opened next shows it in its place."""
    for name in ("message", "checkpoint"):
        value = parse_pk(data.get(name))
        if value is not None:
            return "?" + urlencode({name: value})
    return ""


@login_required
@require_GET
@domain_errors
def branch_read(request: HtmxHttpRequest, pk: int, branch_id: int) -> HttpResponse:
    """The branch's history, read-only: around `?message=` or `?checkpoint=` (an id in its
    history, else 404), or the page before `?before=` / from `?after=` (positions), else its
    latest page. The current branch itself is the chat page."""
    session, branch = _session_branch(request, pk, branch_id)
    if branch.is_current:
        return redirect(reverse("chat:session", args=[session.pk]) + _point(request.GET))
    context = {
        **sidebar(request, current=session),
        **branch_reading(
            request.user,
            session,
            branch,
            message=request.GET.get("message"),
            checkpoint=request.GET.get("checkpoint"),
            before=page_position(request.GET.get("before")),
            after=page_position(request.GET.get("after")),
        ),
        "point": _point(request.GET),
    }
    return render(request, "sessions_app/branch_read.html", context)


@login_required
@require_POST
@domain_errors
def branch_continue(request: HtmxHttpRequest, pk: int, branch_id: int) -> HttpResponse:
    """Continue here: the branch read becomes the current one, and the chat page opens on it
    (at the point the reader was looking at, `message` or `checkpoint`)."""
    session, branch = _session_branch(request, pk, branch_id)
    branch_activate(branch=branch)
    return redirect(reverse("chat:session", args=[session.pk]) + _point(request.POST))
