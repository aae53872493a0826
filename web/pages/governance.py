"""The chat page's side of governance: the owner dismisses an administrator's notice. The
notice goes from this page (the answer is the page's refresh) and from every other open page of
the session (governance.services tells their sockets)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from core.http import HtmxHttpRequest, domain_errors
from governance.services import admin_notice_dismiss
from sessions_app.selectors import get_session_for_user
from web.pages.live import refresh
from web.pages.tabs import answers_with_new_state


@login_required
@require_POST
@domain_errors
@answers_with_new_state
def dismiss(request: HtmxHttpRequest, pk: int, notice_id: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    admin_notice_dismiss(user=request.user, session=session, pk=notice_id)
    if request.htmx:
        return refresh(request, session)
    return redirect("chat:session", pk=session.pk)
