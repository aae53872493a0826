"""The site's addresses and one more for the benchmark's floor (bench.floor): an empty view behind
the API's authentication, permissions and renderer, the cost of a request that does nothing."""

from __future__ import annotations

from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from rollback_site.urls import urlpatterns as site


class Empty(APIView):
    def get(self, request: Request) -> Response:
        return Response({})


EMPTY_PATH = "bench/empty/"

urlpatterns = [path(EMPTY_PATH, Empty.as_view()), *site]
