"""`GET /healthz`: is this server able to serve? For load balancers and monitoring.

Public, outside the API: no authentication, no session, no cookie, no throttle. 200 when every
part checked is ok, 503 otherwise, with a JSON body naming each part and its state (the checks
are ops.health's). It answers over plain HTTP in production too (SECURE_REDIRECT_EXEMPT); the Host
header must still be an allowed host.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from ops import health


# Exempt from CSRF only so that a POST is answered 405 rather than a CSRF 403: the view reads no
# cookie and changes nothing.
@csrf_exempt
@require_http_methods(["GET", "HEAD"])
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    report = health.report()
    return JsonResponse(report.as_json(), status=200 if report.ok else 503)
