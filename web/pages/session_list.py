"""The sidebar's list of sessions (HTML, htmx): the list a page at a time, grouped by date,
searched, archived; a session made, renamed, archived, pinned or deleted from it; a session
exported or imported. Thin: parse, call a service, render the list again."""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget

from accounts.models import User
from agents.history_imports import history_import_started
from checkpoints.foreign.formats import SOURCE_NAMES, skipped_lines
from checkpoints.foreign.selectors import get_import_job_for_user, import_job_sessions
from checkpoints.models import ImportJob
from checkpoints.transfer import session_export
from checkpoints.transfer_markdown import export_filename, export_format, markdown_response
from core.api import non_negative, window
from core.errors import HTTP_STATUS, DomainError, InvalidInput
from core.http import HtmxHttpRequest, domain_errors
from sessions_app.models import Session
from sessions_app.search import hit_snippets, search_clean
from sessions_app.selectors import (
    get_session_for_user,
    latest_session_for_user,
    parse_pk,
    sessions_sidebar,
)
from sessions_app.services import (
    session_create,
    session_delete,
    session_new_or_blank,
    session_update,
)
from web import chat_state as pages

SIDEBAR_PAGE = 50  # sessions per page of the sidebar's list; more come as it scrolls
SIDEBAR_SHOWN_MAX = 1000  # sessions a live update of the list keeps loaded, at most
PINNED = "Pinned"
COUNT_MAX = 999_999_999  # an offset or a count past any list the sidebar shows


def _user(request: HttpRequest) -> User:
    """The user of a request to a @login_required view."""
    user = request.user
    if not isinstance(user, User):  # login_required lets only users in
        raise PermissionDenied
    return user


def _group_label(session: Session, bounds: list[tuple[str, date]]) -> str:
    if session.pinned_at is not None:
        return PINNED
    day = timezone.localdate(session.updated_at)
    return next((name for name, start in bounds if day >= start), "Older")


def _date_groups(sessions: list[Session], after: str = "") -> list[dict[str, Any]]:
    """Sessions (pinned first, then most recently active first) under "Pinned", "Today",
    "Yesterday", "Previous 7 days" and "Older", by their last activity in the site's time zone;
    empty groups left out. `after`: the group the page before ended with, whose heading a page
    that goes on with it does not repeat (`continued`)."""
    today = timezone.localdate()
    bounds = [
        ("Today", today),
        ("Yesterday", today - timedelta(days=1)),
        ("Previous 7 days", today - timedelta(days=7)),
    ]
    groups: list[dict[str, Any]] = []
    for session in sessions:
        label = _group_label(session, bounds)
        if not groups or groups[-1]["label"] != label:
            continued = not groups and label == after
            groups.append({"label": label, "sessions": [], "continued": continued})
        groups[-1]["sessions"].append(session)
    return groups


def _list_state(request: HttpRequest) -> tuple[str, bool, int | None]:
    """What the sidebar list shows, from a request's query string: the search, whether the
    archived sessions are listed, and which session's page it sits on."""
    query = request.GET.get("q", "").strip()  # checked by _sidebar, which says what is wrong
    archived = request.GET.get("archived") in ("1", "true")
    current = parse_pk(request.GET.get("current"))
    return query, archived, current


def _count_param(request: HttpRequest, name: str) -> int:
    """A non-negative integer from the query string or a form's body (0 when absent); anything
    else is a 400, by the API's own rule (core.api.non_negative), and so is a count past any
    list a page shows."""
    params = request.GET if request.GET.get(name) else request.POST
    value = non_negative(params, name) or 0
    if value > COUNT_MAX:
        raise InvalidInput(f"{name} must be a non-negative integer, at most {COUNT_MAX}.")
    return value


def _list_size(request: HttpRequest) -> int:
    """How many sessions the list shows again after a change: as many as it showed (`shown`,
    which sessions.js adds to the list's own requests, up to SIDEBAR_SHOWN_MAX), so pages
    loaded stay loaded; a page at least."""
    return max(SIDEBAR_PAGE, min(_count_param(request, "shown"), SIDEBAR_SHOWN_MAX))


def sidebar(
    request: HttpRequest,
    current: Session | None = None,
    query: str = "",
    archived: bool = False,
    current_id: int | None = None,
    offset: int = 0,
    after: str = "",
    size: int = SIDEBAR_PAGE,
) -> dict[str, Any]:
    """One page of the sidebar's list (`size` sessions from `offset`): the user's sessions (or
    the archived ones) matching `query`, pinned first, then most recently active first,
    grouped; with the address of the next page when there is one. With a search, each hit has
    a snippet of the message that matched (or the list says why the search cannot be read)."""
    search_error = None
    try:
        cleaned = search_clean(query)
    except InvalidInput as exc:
        cleaned, search_error = "", exc.people
    sessions = sessions_sidebar(request.user, query=cleaned, archived=archived)
    shown: list[Session] = []
    more = False
    if not search_error:
        shown, more = window(sessions, offset=offset, size=size)
    snippets = hit_snippets(shown, cleaned) if cleaned else {}
    for session in shown:
        session.search_snippet = snippets.get(session.pk)  # type: ignore[attr-defined]
    if current is not None:
        current_id = current.pk
    state = {"q": query} if query else {}
    if archived:
        state["archived"] = "1"
    if current_id is not None:
        state["current"] = str(current_id)
    groups = _date_groups(shown, after=after)
    next_page = ""
    if more:
        following = {**state, "offset": str(offset + size), "after": groups[-1]["label"]}
        next_page = urlencode(following)
    return {
        "sessions": shown,
        "groups": groups,
        "current": current,
        "current_id": current_id,
        "query": query,
        "search_error": search_error,
        "archived_view": archived,
        "list_state": urlencode(state),
        "next_page": next_page,
        "first_page": offset == 0,
    }


def _list_changed(request: HttpRequest, session: Session) -> HttpResponse:
    """The sidebar's list again after a change to `session` (rename, archive), in the state the
    request names; the page's header too when `session` is the one shown."""
    query, archived, current = _list_state(request)
    context = sidebar(
        request, query=query, archived=archived, current_id=current, size=_list_size(request)
    )
    if current == session.pk:  # its page is the one open: update its header too
        context.update(pages.conversation(session), shown_here=True)
    return render(request, "sessions_app/_list_changed.html", context)


@login_required
@require_GET
def home(request: HtmxHttpRequest) -> HttpResponse:
    latest = latest_session_for_user(request.user)
    if latest is not None:
        return redirect("chat:session", pk=latest.pk)
    return render(request, "sessions_app/home.html", sidebar(request))


@login_required
@require_POST
@domain_errors
def session_new(request: HtmxHttpRequest) -> HttpResponse:
    """The page's "New session" (the sidebar's button, Ctrl+Shift+O): the user's blank session
    when they have one, else a new one (session_new_or_blank), so clicks never pile up empty
    sessions; with a `name`, a new session of that name."""
    name = request.POST.get("name")
    if name:
        session = session_create(owner=_user(request), name=name)
    else:
        session = session_new_or_blank(owner=_user(request))
    return redirect("chat:session", pk=session.pk)


@login_required
@require_GET
@domain_errors
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    """The sidebar's list; with `offset`, the page of it that goes on from there (the "More
    sessions" button's, in place of that button). A live update of the list asks for as many
    sessions as it shows (`shown`, up to SIDEBAR_SHOWN_MAX), so pages loaded stay loaded."""
    query, archived, current = _list_state(request)
    offset = _count_param(request, "offset")
    after = request.GET.get("after", "")[:40]
    context = sidebar(
        request,
        query=query,
        archived=archived,
        current_id=current,
        offset=offset,
        after=after,
        size=_list_size(request) if not offset else SIDEBAR_PAGE,
    )
    if offset:
        return render(request, "sessions_app/_session_page.html", context)
    return render(request, "sessions_app/_session_list.html", context)


@login_required
@require_http_methods(["GET", "POST"])
@domain_errors
def session_rename(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """GET: the list entry as a form holding the current name; POST: rename, then the list (or
    the form again with the reason, when the name is refused)."""
    session = get_session_for_user(request.user, pk)
    context = {"s": session, "value": session.session_name, "list_state": request.GET.urlencode()}
    if request.method == "GET":
        return render(request, "sessions_app/_session_rename.html", context)
    name = request.POST.get("name", "")
    try:
        session_update(session=session, name=name)
    except InvalidInput as exc:
        context.update(error=exc.people, value=name)
        response = render(request, "sessions_app/_session_rename.html", context, status=400)
        return reswap(retarget(response, f"#session-{session.pk}"), "outerHTML")
    return _list_changed(request, session)


@login_required
@require_POST
@domain_errors
def session_archive(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    session_update(session=session, archived=True)
    return _list_changed(request, session)


@login_required
@require_POST
@domain_errors
def session_unarchive(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    session_update(session=session, archived=False)
    return _list_changed(request, session)


@login_required
@require_POST
@domain_errors
def session_pin(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    session_update(session=session, pinned=True)
    return _list_changed(request, session)


@login_required
@require_POST
@domain_errors
def session_unpin(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    session_update(session=session, pinned=False)
    return _list_changed(request, session)


@login_required
@require_POST
@domain_errors
def session_remove(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Delete a session. From the sidebar of another session's page, it only leaves the list;
    the page shown goes home (the most recently active session) only when it was this one's."""
    session = get_session_for_user(request.user, pk)
    session_delete(session=session)
    query, archived, current = _list_state(request)
    if request.htmx and current is not None and current != session.pk:
        context = sidebar(
            request, query=query, archived=archived, current_id=current, size=_list_size(request)
        )
        return render(request, "sessions_app/_session_list.html", context)
    messages.success(request, f"Deleted “{session.session_name}”.")
    return HttpResponseClientRedirect(reverse("chat:home"), status=204)


@login_required
@require_GET
@domain_errors
def export(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The session as a download: the JSON document that imports back, or with
    `?format=markdown` its current branch to read."""
    session = get_session_for_user(request.user, pk)
    if export_format(request.GET.get("format")) == "markdown":
        return markdown_response(session)
    body = json.dumps(session_export(session=session), ensure_ascii=False, indent=1)
    response = HttpResponse(body, content_type="application/json")
    filename = export_filename(session, "json")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _import_failed(request: HtmxHttpRequest, text: str, status: int = 400) -> HttpResponse:
    if request.htmx:  # the sidebar's form: the answer in its place
        context = {"error": text}
        return render(request, "sessions_app/_import_result.html", context, status=status)
    messages.error(request, f"Import failed: {text}")
    return redirect("chat:home")


def _job_context(job: ImportJob) -> dict[str, Any]:
    return {
        "job": job,
        "source_name": SOURCE_NAMES.get(job.source, job.source),
        "sessions": import_job_sessions(job),
        "skipped": skipped_lines(job.skipped),
    }


@login_required
@require_POST
def import_session(request: HtmxHttpRequest) -> HttpResponse:
    """Rollback's own export, or a ChatGPT, Open WebUI or LibreChat export: one conversation opens
    as a session; several are imported by a job, whose progress the answer shows."""
    upload = request.FILES.get("document")
    if upload is None:
        return _import_failed(request, "Choose an exported file (.json) to import.")
    raw = upload.read(settings.ROLLBACK_IMPORT_MAX_BYTES + 1)
    try:
        imported = history_import_started(owner=_user(request), raw=raw, filename=upload.name or "")
    except DomainError as exc:  # a broken document, or no room for one more session
        return _import_failed(request, exc.people, HTTP_STATUS.get(exc.code, 400))
    if isinstance(imported, ImportJob):
        job = get_import_job_for_user(request.user, imported.pk)
        if request.htmx:
            return render(request, "sessions_app/_import_result.html", _job_context(job))
        return redirect("chat:import_job", pk=job.pk)
    session = imported.session
    left_out = skipped_lines(imported.skipped)
    note = f" Left out: {', '.join(left_out)}." if left_out else ""
    messages.success(request, f"Imported “{session.session_name}”.{note}")
    if request.htmx:
        return HttpResponseClientRedirect(reverse("chat:session", args=[session.pk]))
    return redirect("chat:session", pk=session.pk)


@login_required
@require_GET
@domain_errors
def import_job(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """An import job's progress: the box alone (its own polling), or a page holding it."""
    context = _job_context(get_import_job_for_user(request.user, pk))
    if request.htmx:
        return render(request, "sessions_app/_import_job.html", context)
    return render(request, "sessions_app/import_job.html", context)
