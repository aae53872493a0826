"""Headers on the app's own responses (pages, fragments, the API; static files are WhiteNoise's):
the Content Security Policy, and no caching of anything private."""

from __future__ import annotations

from csp.middleware import CSPMiddleware, PolicyParts
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.cache import add_never_cache_headers
from django.utils.deprecation import MiddlewareMixin


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's policy (settings.CONTENT_SECURITY_POLICY), with this host's WebSocket added to
    connect-src for the chat: ws://host on an HTTP page, wss://host on an HTTPS one. Browsers of
    CSP Level 3 count it as 'self' already; older ones do not."""

    def get_policy_parts(
        self, request: HttpRequest, response: HttpResponseBase, report_only: bool = False
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        try:
            host = request.get_host()
        except DisallowedHost:  # the answer is the 400 that says so; no socket to allow
            return parts
        if host.startswith("["):  # an IPv6 address is no CSP host source; 'self' covers it
            return parts
        scheme = "wss" if request.is_secure() else "ws"
        update = dict(parts.update or {})
        update["connect-src"] = [*update.get("connect-src", []), f"{scheme}://{host}"]
        parts.update = update
        return parts


class PrivateByDefaultMiddleware(MiddlewareMixin):
    """Cache-Control: no-store (Django's never_cache) on every response whose view did not set a
    Cache-Control of its own. Nearly every response carries someone's conversations or keys: no
    browser or proxy cache keeps any of them."""

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if not response.has_header("Cache-Control"):
            add_never_cache_headers(response)
        return response
