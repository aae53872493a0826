"""Headers on the app's own responses (pages, fragments, the API; static files are WhiteNoise's):
the Content Security Policy, and no caching of anything private. And the request's id, on its
log lines and its response."""

from __future__ import annotations

import ipaddress
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote_to_bytes, urlencode, urlsplit

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from csp.middleware import CSPMiddleware, PolicyParts
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import BACKEND_SESSION_KEY, REDIRECT_FIELD_NAME
from django.core.exceptions import BadRequest, DisallowedHost
from django.http import HttpRequest, HttpResponseRedirect, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render, resolve_url
from django.utils.cache import add_never_cache_headers
from django.utils.deprecation import MiddlewareMixin
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import HttpResponseClientRedirect

from core import logs

# An id a proxy in front gave the request (a UUID, a hex or base64 token, ...) is kept when it is
# this short and plain; anything else could forge or break a log line, and is replaced.
REQUEST_ID_HEADER = "X-Request-ID"
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:+=/-]{1,128}")


def request_id_for(request: HttpRequest) -> str:
    """The request's incoming X-Request-ID when it is sane, else a new one (uuid4, hex)."""
    incoming = request.headers.get(REQUEST_ID_HEADER, "")
    if SANE_REQUEST_ID.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


class RequestIdMiddleware:
    """Gives every request an id (`request.request_id`), binds it and the signed-in user's id to
    the request's log lines (core.logs), and returns it in the X-Request-ID response header.
    First in MIDDLEWARE, so the others' lines and answers carry it too. The user is known once
    the other middleware ran (`process_view`); an API key is read later, by DRF inside the view
    (web.api.authentication binds that user)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self.__acall__(request)
        request_id = request.request_id = request_id_for(request)  # type: ignore[attr-defined]
        with logs.bound(request_id=request_id, user_id=None, session_id=None, turn_id=None):
            response = self.get_response(request)
        response[REQUEST_ID_HEADER] = request_id
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        request_id = request.request_id = request_id_for(request)  # type: ignore[attr-defined]
        get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]] = self.get_response
        with logs.bound(request_id=request_id, user_id=None, session_id=None, turn_id=None):
            response = await get_response(request)
        response[REQUEST_ID_HEADER] = request_id
        return response

    def process_view(self, request: HttpRequest, *args: Any) -> None:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            logs.bind(user_id=user.pk)


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


# The public page of a share link (web.pages.shared) and everything under its prefix.
SHARED_PAGES_PREFIX = "/s/"


class NoCookiesOnSharedPagesMiddleware(MiddlewareMixin):
    """A shared conversation's page is for anyone with its address: it sets no cookie at all
    (no session, no CSRF token, no message), even for a signed-in visitor, whatever a later
    middleware or the view did. The view itself reads neither the session nor the user; this
    is the guarantee. Above SessionMiddleware and CsrfViewMiddleware, so it sees their cookies."""

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if request.path.startswith(SHARED_PAGES_PREFIX):
            response.cookies.clear()
        return response


class UndecodableRequest(BadRequest):
    """An address whose path or query string is not UTF-8 text (400, with this message)."""


def _text_bytes(value: bytes | str) -> bytes:
    """Bytes as they are; text as UTF-8, a surrogate in it kept as its bytes, so it is found."""
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")


def _wsgi_bytes(value: str) -> bytes:
    """A WSGI server's text is one byte per character (PEP 3333); a test client's may not be."""
    try:
        return value.encode("iso-8859-1")
    except UnicodeEncodeError:
        return _text_bytes(value)


def _is_utf8(raw: bytes) -> bool:
    """Whether bytes are UTF-8 text; Python's strict decoder also refuses encoded surrogates
    (U+D800 to U+DFFF, which are no text)."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class UndecodableRequestMiddleware(MiddlewareMixin):
    """Refuses with 400 an address whose path or query string, percent-decoded, is not UTF-8:
    Django would read each bad byte as U+FFFD, and a search or an id would silently become
    another. Bodies are the parsers' (core.parsers for the API's JSON; Django's form parsing
    for the pages, which keeps to U+FFFD too but never echoes what it read)."""

    def process_request(self, request: HttpRequest) -> HttpResponseBase | None:
        try:
            self._check(request)
        except UndecodableRequest as exc:
            if request.path.startswith("/api/"):  # JSON, with DEBUG on too (handler400 is not)
                return JsonResponse({"detail": str(exc)}, status=400)
            raise
        return None

    def _check(self, request: HttpRequest) -> None:
        scope = getattr(request, "scope", None)
        if scope is not None:  # ASGI (the app's servers): the bytes as they came
            raw_path = scope.get("raw_path")
            path = unquote_to_bytes(raw_path) if raw_path else _text_bytes(scope.get("path", ""))
            query = _text_bytes(scope.get("query_string") or b"")
        else:  # WSGI: Django has put the path's bad bytes back as %XX, matching no route (404)
            path = b""
            query = _wsgi_bytes(getattr(request, "environ", {}).get("QUERY_STRING", ""))
        if not _is_utf8(path):
            raise UndecodableRequest("The address is not valid UTF-8 text.")
        if not _is_utf8(unquote_to_bytes(query.replace(b"+", b" "))):
            raise UndecodableRequest(
                "The query string is not valid UTF-8 text once percent-decoded (a byte that is "
                "no character, or a lone surrogate)."
            )


def _page_path(request: HttpRequest, url: str) -> str | None:
    """The path and query of `url` when it is a page of this site (else None)."""
    if not url or not url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return None
    parts = urlsplit(url)
    if not parts.path.startswith("/"):
        return None
    return parts.path + (f"?{parts.query}" if parts.query else "")


class WholePageSignInMiddleware(MiddlewareMixin):
    """A login that ended (logged out in another tab, expired) sends the reader to the whole
    sign-in page, which then returns to the page they were on, never to a fragment's address:

    - an htmx request (send, save checkpoint, rename, a live refresh ...) that @login_required
      turns away gets HX-Redirect (django-htmx's HttpResponseClientRedirect) to the login page,
      with `next` the page's own address (HX-Current-URL), so htmx loads the page rather than
      swapping the login form into the chat column or a panel;
    - a plain form post turned away gets `next` the page it was posted from (Referer): the
      post's own address answers GET with 405;
    - an htmx post refused by the CSRF check to someone not signed in (the browser lost all its
      cookies) leads to the sign-in the same way, rather than a 403 page swapped into the chat.

    The API (its own 401/403 JSON) and sockets never redirect, so they are not concerned."""

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        htmx = bool(request.headers.get("HX-Request"))
        # login_required's redirect, or (for htmx) a post without its CSRF cookie, all cookies
        # gone: signing in again sets one.
        turned_away = (isinstance(response, HttpResponseRedirect) and self._to_login(response)) or (
            htmx and self._refused_signed_out(request, response)
        )
        if not turned_away:
            return response
        if htmx:
            back = _page_path(request, request.headers.get("HX-Current-URL", ""))
        elif request.method == "POST":
            back = _page_path(request, request.headers.get("Referer", ""))
        else:
            return response
        login = resolve_url(settings.LOGIN_URL)
        target = f"{login}?{urlencode({REDIRECT_FIELD_NAME: back})}" if back else login
        if htmx:
            redirect = HttpResponseClientRedirect(target)
            add_never_cache_headers(redirect)
            return redirect
        response["Location"] = target
        return response

    @staticmethod
    def _refused_signed_out(request: HttpRequest, response: HttpResponseBase) -> bool:
        """A page's 403 to a visitor who is not signed in (the CSRF check, before the view's
        login_required could answer): the API's refusals are its own JSON."""
        user = getattr(request, "user", None)
        signed_out = user is None or not user.is_authenticated
        return response.status_code == 403 and signed_out and not request.path.startswith("/api/")

    @staticmethod
    def _to_login(response: HttpResponseRedirect) -> bool:
        """Whether this is login_required's redirect (the login page, with `next`); logging out
        also ends on the login page, without `next`, and is left as it is."""
        parts = urlsplit(response.url)
        asked_back = f"{REDIRECT_FIELD_NAME}=" in parts.query
        return asked_back and parts.path == resolve_url(settings.LOGIN_URL)


class TrustedProxyUserMiddleware(MiddlewareMixin):
    """Behind an authenticating proxy (installed only with AUTH_PROXY_HEADER): a request that
    comes straight from one of AUTH_PROXY_ADDRESSES (the connection's own address, never a
    forwarded one) signs in the person its header names (accounts.proxy), and one without the
    header signs out whoever the header had signed in. From any other address the header is
    ignored. An account that waits for approval, or a name that is no username, gets a page
    saying so."""

    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)
        self.key = "HTTP_" + settings.AUTH_PROXY_HEADER.upper().replace("-", "_")
        self.networks = [
            ipaddress.ip_network(address, strict=False) for address in settings.AUTH_PROXY_ADDRESSES
        ]

    def _from_proxy(self, request: HttpRequest) -> bool:
        try:
            peer = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
        except ValueError:
            return False
        return any(peer in network for network in self.networks)

    def process_request(self, request: HttpRequest) -> HttpResponseBase | None:
        from accounts.errors import AccountNotApproved
        from accounts.proxy import PROXY_BACKEND

        if not self._from_proxy(request):
            return None
        name = request.META.get(self.key, "").strip()
        user = request.user
        if not name:
            if user.is_authenticated and request.session.get(BACKEND_SESSION_KEY) == PROXY_BACKEND:
                auth.logout(request)
            return None
        if user.is_authenticated and user.get_username().lower() == name.lower():
            return None
        if user.is_authenticated:
            auth.logout(request)
        try:
            found = auth.authenticate(request, proxy_username=name)
        except AccountNotApproved as exc:
            context = {"text": exc.message, "refused": exc.refused, "username": name[:150]}
            return render(request, "accounts/waiting.html", context, status=403)
        if found is None:
            text = "The proxy in front of this server named no account that can sign in here."
            context = {"text": text, "refused": True, "username": ""}
            return render(request, "accounts/waiting.html", context, status=403)
        auth.login(request, found)
        request.user = found
        return None
