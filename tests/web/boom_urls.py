"""The project's URLs plus one view that fails, to see the 500 page (tests only)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from rollback_site.urls import handler404, handler500
from rollback_site.urls import urlpatterns as site_urlpatterns


def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("boom")


urlpatterns = [
    path("boom/", boom),
    path("api/v1/boom/", boom),
    *site_urlpatterns,
]

__all__ = ["handler404", "handler500", "urlpatterns"]
