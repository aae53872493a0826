"""The MCP servers in the pages: the chat's Tools menu (a dialog: the servers the user may use,
each turned on or off for this session, and their own credentials for one that asks) and the
profile's "MCP servers" section (their own credentials for each server that asks for some).
Thin: find the session and the server from the user (agents.mcp.access: another user's session,
or a server they may not use, is a 404), call the service, render.

A credential typed in a form is never rendered back: the fields are password inputs that start
empty, and a refusal names the header, never the value."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from accounts.models import User
from agents.mcp.access import get_server_for_user, server_views, session_server_choose
from agents.mcp.credentials import mcp_credentials_delete, mcp_credentials_set
from agents.mcp.models import McpServer
from core.errors import InvalidInput
from core.http import HtmxHttpRequest, domain_errors
from sessions_app.models import Session
from sessions_app.selectors import get_session_for_user

FIELD_PREFIX = "header:"


def _user(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User):  # login_required lets only users in
        raise PermissionDenied
    return user


def _dialog(
    request: HttpRequest, session: Session, *, error: str = "", saved: str = ""
) -> HttpResponse:
    context = {
        "session": session,
        "servers": server_views(_user(request), session),
        "error": error,
        "saved": saved,
    }
    # 200 with the reason: the page's dialogs close on an error status.
    return render(request, "sessions_app/_session_tools.html", context)


def _posted_headers(request: HttpRequest, server: McpServer) -> dict[str, str]:
    """The values typed for each header the server asks for (a header asked for but left
    blank is missing, and refused as such)."""
    values: dict[str, str] = {}
    for key in request.POST:
        value = request.POST.get(key, "")
        if key.startswith(FIELD_PREFIX) and isinstance(value, str) and value.strip():
            values[key.removeprefix(FIELD_PREFIX)] = value
    return values


@login_required
@never_cache
@require_http_methods(["GET", "POST"])
@domain_errors
def session_tools(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """GET: the Tools menu. POST `server` and `on` (the last of its values: a checkbox after a
    hidden "false"): that server on or off in this session (`session.changed`)."""
    user = _user(request)
    session = get_session_for_user(user, pk)
    if request.method == "GET":
        return _dialog(request, session)
    server = get_server_for_user(user, request.POST.get("server"))
    chosen = request.POST.getlist("on")
    if not chosen or chosen[-1] not in ("true", "false"):
        return _dialog(request, session, error="on: must be true or false.")
    session_server_choose(session=session, server=server, on=chosen[-1] == "true")
    return _dialog(request, session)


@login_required
@never_cache
@require_POST
@domain_errors
def session_tools_credentials(request: HtmxHttpRequest, pk: int, name: str) -> HttpResponse:
    """The user's own credentials for one server, from the Tools menu: the menu again, saying
    they were saved, or why not (nothing stored changes)."""
    user = _user(request)
    session = get_session_for_user(user, pk)
    server = get_server_for_user(user, name)
    try:
        mcp_credentials_set(user=user, server=server, headers=_posted_headers(request, server))
    except InvalidInput as exc:
        return _dialog(request, session, error=exc.people)
    return _dialog(request, session, saved=server.name)


@login_required
@never_cache
@require_POST
@domain_errors
def credentials_save(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """The user's own credentials for one server, from the profile."""
    user = _user(request)
    server = get_server_for_user(user, name)
    try:
        mcp_credentials_set(user=user, server=server, headers=_posted_headers(request, server))
    except InvalidInput as exc:
        messages.error(request, exc.people)
    else:
        messages.success(
            request, f"Your credentials for {server.name} are saved; they are never shown again."
        )
    return redirect(reverse("accounts:profile") + "#mcp-servers")


@login_required
@require_POST
@domain_errors
def credentials_remove(request: HtmxHttpRequest, name: str) -> HttpResponse:
    user = _user(request)
    server = get_server_for_user(user, name)
    mcp_credentials_delete(user=user, server=server)
    messages.success(request, f"Your credentials for {server.name} are removed.")
    return redirect(reverse("accounts:profile") + "#mcp-servers")
