"""The project's URLs plus views that fail, to see the 500 and 503 pages (tests only)."""

from __future__ import annotations

import redis.exceptions
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from django.urls import path

from rollback_site.urls import handler404, handler500
from rollback_site.urls import urlpatterns as site_urlpatterns


def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("boom")


def database_down(request: HttpRequest) -> HttpResponse:
    raise OperationalError("connection to server at 127.0.0.1, port 5999 failed")


def redis_down(request: HttpRequest) -> HttpResponse:
    try:
        raise redis.exceptions.TimeoutError("Timeout reading from 127.0.0.1:6999")
    except redis.exceptions.TimeoutError as exc:
        raise RuntimeError("the cache failed") from exc


urlpatterns = [
    path("boom/", boom),
    path("api/v1/boom/", boom),
    path("database-down/", database_down),
    path("api/v1/database-down/", database_down),
    path("redis-down/", redis_down),
    path("api/v1/redis-down/", redis_down),
    *site_urlpatterns,
]

__all__ = ["handler404", "handler500", "urlpatterns"]
