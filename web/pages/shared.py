"""The public page of a share link, /s/<token>/: one branch's history as it stood when shared (or
up to a checkpoint), for anyone with the address.

Read-only and standalone: it renders without the request (no context processor reads the user
or the session, no CSRF token is made), shows neither the owner nor the session's name (the
automatic title is made from the whole conversation, past the shared point too), and sends
`noindex`, `no-referrer` and `no-store`. web.middleware.NoCookiesOnSharedPagesMiddleware
strips any cookie all the same. Messages go through the chat's own partial
(`sessions_app/_message.html`), so the sanitising is the chat's. A token that is malformed,
unknown or deleted is the site's 404 page, at once, without cookies either.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from sharing.selectors import share_for_token, shared_page
from sharing.services import share_viewed
from web.chat_state import joined_replies

# Messages per page: a long history is read a page at a time ("Earlier messages").
PAGE = 200


def _private(response: HttpResponse) -> HttpResponse:
    response["X-Robots-Tag"] = "noindex, nofollow"
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "private, no-store"
    return response


def _position(raw: str) -> int | None:
    """`?from=` as a position, or None when it is none (digits only, at most 12)."""
    if raw.isascii() and raw.isdigit() and len(raw) <= 12:
        return int(raw)
    return None


@require_GET
def shared(request: HttpRequest, token: str) -> HttpResponse:
    share = share_for_token(token)
    if share is None:
        html = render_to_string("404.html", {"theme": "system", "share_gone": True})
        return _private(HttpResponse(html, status=404))
    raw = request.GET.get("from", "")
    start = _position(raw) if raw else None
    if raw and start is None:
        html = render_to_string(
            "sharing/shared_error.html",
            {"text": "That page of the conversation is not a number of messages."},
        )
        return _private(HttpResponse(html, status=400))
    page = shared_page(share, size=PAGE, start=start)
    share_viewed(share=share)
    context = {
        "share": share,
        "page": page,
        "history": joined_replies(page.messages),
        "earlier": max(0, page.start - PAGE) if page.start > 0 else None,
        "later": page.end if page.end < page.count else None,
    }
    return _private(HttpResponse(render_to_string("sharing/shared.html", context)))
