"""The project's 400, 404, 500 and 503 answers: the app's own pages with a way back, and JSON
under /api/ (an API client never gets an HTML page).

`server_error` is Django's handler500, which every uncaught error of a request reaches, from a
view, an API view or a middleware alike (the session or the user loaded on the way in, the
session saved on the way out). An error that says the database or Redis does not answer
(`core.unavailable`) is an outage, not a bug: it is a 503 with a readable message, from a page
that needs neither of them, nor the request's context, nor the static files' manifest.
"""

from __future__ import annotations

import sys

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults

from core.unavailable import MESSAGE, RETRY_AFTER, is_unavailable
from web.middleware import UndecodableRequest


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A request Django refuses (SuspiciousOperation, BadRequest): its reason is said only when
    it is ours to say (UndecodableRequest); Django's own may name the server's settings."""
    if _is_api(request):
        detail = str(exception) if isinstance(exception, UndecodableRequest) else "Bad request."
        return JsonResponse({"detail": detail}, status=400)
    return defaults.bad_request(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception, template_name="404.html")


def server_error(request: HttpRequest) -> HttpResponse:
    """500.html is a static page: it needs neither the database nor the request's context.
    Django calls this while handling the error (asgiref re-raises it in the thread that runs
    this under ASGI), so `sys.exc_info()` is the error."""
    if is_unavailable(sys.exc_info()[1]):
        return service_unavailable(request)
    if _is_api(request):
        return JsonResponse({"detail": "Server error."}, status=500)
    return defaults.server_error(request, template_name="500.html")


def service_unavailable(request: HttpRequest) -> HttpResponse:
    """503: the database or Redis does not answer."""
    response: HttpResponse
    if _is_api(request):
        response = JsonResponse({"detail": MESSAGE}, status=503)
    else:
        html = render_to_string("503.html", {"message": MESSAGE})  # no request: no context
        response = HttpResponse(html, status=503)
    response["Retry-After"] = str(RETRY_AFTER)
    return response
