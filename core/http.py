"""Domain errors to HTTP for the HTML views, in one place.

A request from htmx gets the error as a notice fragment swapped into the page's notice area
(with the status code kept); a plain request gets a 404 page for "not found" and otherwise a
message on the page it came from.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Concatenate, ParamSpec

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import reswap, retarget

from core.errors import HTTP_STATUS, DomainError

if TYPE_CHECKING:
    from django_htmx.middleware import HtmxDetails

P = ParamSpec("P")


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware (in MIDDLEWARE for every page)."""

    htmx: HtmxDetails


def notice(
    request: HttpRequest, text: str, *, status: int = 200, kind: str = "error"
) -> HttpResponse:
    html = render_to_string("core/_notice.html", {"text": text, "kind": kind}, request)
    return reswap(retarget(HttpResponse(html, status=status), "#notices"), "innerHTML")


def domain_errors(
    view: Callable[Concatenate[HtmxHttpRequest, P], HttpResponse],
) -> Callable[Concatenate[HtmxHttpRequest, P], HttpResponse]:
    @functools.wraps(view)
    def wrapper(request: HtmxHttpRequest, /, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except DomainError as exc:
            status = HTTP_STATUS.get(exc.code, 400)
            if request.htmx:
                return notice(request, exc.people, status=status)
            if status == 404:
                raise Http404(exc.people) from None
            messages.error(request, exc.people)
            back = request.META.get("HTTP_REFERER", "")
            safe = url_has_allowed_host_and_scheme(
                back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
            )
            return redirect(back if safe and back else "chat:home")

    return wrapper
