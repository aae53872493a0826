"""The project's 400, 404 and 500 answers: the app's own pages with a way back, and JSON under /api/
(an API client never gets an HTML page)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

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
    """500.html is a static page: it needs neither the database nor the request's context."""
    if _is_api(request):
        return JsonResponse({"detail": "Server error."}, status=500)
    return defaults.server_error(request, template_name="500.html")
