"""The chat page (HTML, htmx): the conversation, a page of it at a time or around a message,
and what is done to it (send, retry, stop, edit, regenerate, continue, switch or rename a
branch). Thin: parse, call a service, answer with the page's new state (web.pages.live)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import reswap, retarget

from agents.services import (
    reply_continue,
    turn_edit,
    turn_regenerate,
    turn_resubmit,
    turn_submit,
)
from core.errors import InvalidInput
from core.http import HtmxHttpRequest, domain_errors
from sessions_app.labels import branch_label
from sessions_app.models import Message
from sessions_app.search import search_clean
from sessions_app.selectors import (
    conversation_hits,
    get_branch_for_user,
    get_session_for_user,
    get_turn_for_user,
    message_for_user,
    parse_pk,
)
from sessions_app.services import branch_activate, branch_rename
from sessions_app.turns import turn_cancel
from web import chat_state as pages
from web import places
from web.pages.live import composer, files_context, refresh
from web.pages.session_list import sidebar
from web.pages.tabs import answers_with_new_state, new_tab_id


@login_required
@require_GET
@domain_errors
def session_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    target = request.GET.get("message")  # a search hit: that message in its place
    marked = request.GET.get("checkpoint")  # the panel's "Show in conversation"
    state_at = pages.state_stamp()
    if target is not None:
        shown = places.conversation_around(request.user, session, target)
    elif marked is not None:
        shown = places.conversation_at_checkpoint(request.user, session, marked)
    else:
        shown = pages.page_state(session)
    if "elsewhere_branch" in shown:  # on another branch: read there, nothing switched
        name, raw = ("message", target) if target is not None else ("checkpoint", marked)
        point = urlencode({name: parse_pk(raw)})
        read = reverse("chat:branch_read", args=[session.pk, shown["elsewhere_branch"]])
        return redirect(f"{read}?{point}")
    if target is not None or marked is not None:
        shown = {**shown, **pages.panel(session)}
    context = {
        **sidebar(request, current=session),
        **shown,
        **files_context(session, shown["branch"]),
        "state_at": state_at,
        "tab": new_tab_id(),
    }
    return render(request, "sessions_app/chat.html", context)


@login_required
@require_GET
@domain_errors
def conversation_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The page of messages before position `before` (the "load earlier" button)."""
    session = get_session_for_user(request.user, pk)
    before: int | None
    try:
        before = int(request.GET.get("before", ""))
    except ValueError:
        before = None
    context = pages.conversation(session, before=before)
    return render(request, "sessions_app/_earlier.html", context)


@login_required
@require_GET
@domain_errors
def conversation_later(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The page of messages from position `after` on (the "load later" button of a history
    opened around a message)."""
    session = get_session_for_user(request.user, pk)
    after = parse_pk(request.GET.get("after")) or 0  # none or not a position: from the start
    context = places.conversation_after(session, after)
    return render(request, "sessions_app/_later.html", context)


@login_required
@require_GET
@domain_errors
def conversation_search(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The messages of the current branch's history that match `q`, newest first, each with a
    snippet and a link to it in its place (or why the search cannot be read), with how many
    match in all. With `before` (its "Show more"): the next page of older hits alone, below
    that position, to put in place of the button."""
    session = get_session_for_user(request.user, pk)
    query = request.GET.get("q", "").strip()
    older = "before" in request.GET
    before = (parse_pk(request.GET.get("before")) or 0) if older else None
    context: dict[str, Any] = {"session": session, "query": query, "found": None}
    try:
        context["found"] = conversation_hits(session, search_clean(query), before=before)
    except InvalidInput as exc:
        context["search_error"] = exc.people
    if older:
        return render(request, "sessions_app/_conversation_hits.html", context)
    return render(request, "sessions_app/_conversation_search.html", context)


@login_required
@require_GET
@domain_errors
def conversation_refresh(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    return refresh(request, session)


@login_required
@require_POST
@domain_errors
def send(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Send a message. In an archived session it brings the session back (sessions_app.turns),
    and the page says so."""
    session = get_session_for_user(request.user, pk)
    archived = session.archived_at is not None
    turn_submit(session=session, message=request.POST.get("message", ""))
    response = composer(request, session)
    if archived:
        notice = render_to_string(
            "sessions_app/_unarchived_notice.html", {"session": session}, request
        )
        response.content += notice.encode()
    return response


@login_required
@require_POST
@domain_errors
def retry(request: HtmxHttpRequest, pk: int, turn_id: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    turn_resubmit(turn=get_turn_for_user(request.user, turn_id, session=session))
    return composer(request, session)


@login_required
@require_POST
@domain_errors
@answers_with_new_state
def cancel(request: HtmxHttpRequest, pk: int, turn_id: int) -> HttpResponse:
    """Stop: the turn ends cancelled, the reply shown so far kept as its stopped message; the
    conversation, the header and the composer's buttons (out of band) show it at once."""
    session = get_session_for_user(request.user, pk)
    turn_cancel(turn=get_turn_for_user(request.user, turn_id, session=session))
    return refresh(request, session)


@login_required
@require_GET
@domain_errors
def edit_form(request: HtmxHttpRequest, pk: int, message_id: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    message = message_for_user(request.user, session, message_id, role=Message.Role.USER)
    if message is None:
        return HttpResponse(status=404)
    return render(request, "sessions_app/_edit_form.html", {"session": session, "m": message})


@login_required
@require_POST
@domain_errors
@answers_with_new_state
def edit(request: HtmxHttpRequest, pk: int, message_id: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    turn_edit(session=session, message_id=message_id, text=request.POST.get("message", ""))
    return refresh(request, session)


@login_required
@require_POST
@domain_errors
@answers_with_new_state
def regenerate(request: HtmxHttpRequest, pk: int, message_id: int) -> HttpResponse:
    """Regenerate, or "Regenerate with…" a model (`model`: that model answers this turn only)."""
    session = get_session_for_user(request.user, pk)
    turn_regenerate(session=session, message_id=message_id, model=request.POST.get("model"))
    return refresh(request, session)


@login_required
@require_POST
@domain_errors
@answers_with_new_state
def continue_reply(request: HtmxHttpRequest, pk: int, message_id: int) -> HttpResponse:
    """Continue: the cut-off reply is extended in place (no "Continue." message is sent); the
    page shows its bubble streaming again at once."""
    session = get_session_for_user(request.user, pk)
    reply_continue(session=session, message_id=message_id)
    return refresh(request, session)


@login_required
@require_POST
@domain_errors
def message_branch(request: HtmxHttpRequest, pk: int, message_id: int) -> HttpResponse:
    """A search hit on another branch: make the branch that holds the message current, then
    show the message in its place there."""
    session = get_session_for_user(request.user, pk)
    message = message_for_user(request.user, session, message_id)
    if message is None:
        return HttpResponse(status=404)
    branch_activate(branch=message.branch)
    return redirect(f"{reverse('chat:session', args=[session.pk])}?message={message.pk}")


@login_required
@require_POST
@domain_errors
@answers_with_new_state
def activate(request: HtmxHttpRequest, pk: int, branch_id: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    branch = get_branch_for_user(request.user, branch_id)
    if branch.session_id != session.pk:
        return HttpResponse(status=404)
    branch_activate(branch=branch)
    return refresh(request, session)


@login_required
@require_POST
@domain_errors
@answers_with_new_state
def branch_rename_view(request: HtmxHttpRequest, pk: int, branch_id: int) -> HttpResponse:
    """Rename a branch from the tree. Refused names come back in the form, with what was typed."""
    session = get_session_for_user(request.user, pk)
    branch = get_branch_for_user(request.user, branch_id)
    if branch.session_id != session.pk:
        return HttpResponse(status=404)
    typed = request.POST.get("name", "")
    try:
        branch_rename(branch=branch, name=typed)
    except InvalidInput as exc:
        context = {
            "session": session,
            "branch": branch,
            "label": branch_label(branch),
            "typed": typed,
            "error": exc.people,
        }
        response = render(request, "sessions_app/_branch_rename_form.html", context, status=400)
        return reswap(retarget(response, f"#rename-branch-{branch.pk}"), "outerHTML")
    return refresh(request, session)
