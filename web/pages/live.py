"""The chat page's refresh: everything that depends on the current branch (the conversation, its
header and composer, the side panel's tree and checkpoints, the Files panel's tree), rendered as
out-of-band swaps, each part computed once.

One fetch per action: a view that changes what the page shows answers with the refresh, for
the view of the tab that asked (web.pages.tabs), and that tab's socket leaves the events of its
own change alone; every other tab fetches the same refresh once per event, through its socket's
`#live-refresh`, with its own view.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

from sessions_app.models import Branch, Session
from web import chat_state as pages
from web.pages.files import files_state, upload_limits
from web.pages.tabs import PageView


def files_context(session: Session, branch: Branch, view: PageView | None = None) -> dict[str, Any]:
    """The Files panel (under `files`: its tree is named like the branch tree of the side panel)."""
    path, sha = (view.open_path, view.open_sha) if view is not None else ("", "")
    return {"files": {**files_state(session, branch, open_path=path, sha=sha), **upload_limits()}}


def refresh_context(request: HttpRequest, session: Session) -> dict[str, Any]:
    view = PageView.of(request)
    state = pages.page_state(session, chosen=view.checkpoints, shown=view.shown)
    list_view = f"{view.checkpoints.kind}|{view.checkpoints.scope}|{view.shown}"
    return {**state, **files_context(session, state["branch"], view), "list_view": list_view}


def refresh(request: HttpRequest, session: Session, extra: str = "") -> HttpResponse:
    """Everything that depends on the current branch, as out-of-band swaps (after `extra`, the
    answer for the request's own target)."""
    html = render_to_string(
        "sessions_app/_refresh.html", refresh_context(request, session), request
    )
    return HttpResponse(extra + html)


def composer(request: HttpRequest, session: Session) -> HttpResponse:
    """The composer, emptied, with its buttons as the turn just sent leaves them: one query (the
    user's message and the reply come with the socket's `turn.started`, as in every other tab)."""
    return HttpResponse(
        render_to_string("sessions_app/_composer.html", pages.composer_state(session), request)
    )
