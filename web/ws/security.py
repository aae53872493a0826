"""WebSocket handshake checks.

A browser sends its cookies with a WebSocket handshake to our host whichever site's page opens
it, and always says which site in the Origin header. So a socket opened by another site's page
must be refused (cross-site WebSocket hijacking), exactly as Django's CSRF check refuses a form
posted from another site:

- A handshake with Origin (a browser's) is accepted only when that Origin is the origin of the
  request itself, scheme, host and port alike, or one of CSRF_TRUSTED_ORIGINS. The request's
  scheme is `https` for `wss` (or, behind a proxy, by SECURE_PROXY_SSL_HEADER), its host and port
  are the Host header's, and that host must be one of ALLOWED_HOSTS. With ALLOWED_HOSTS = ['*']
  another site's origin is still refused: it is never the origin of the request.
- A handshake without Origin is not a browser's: its cookies are ignored, so only an API key
  (`Authorization: Bearer`) can authenticate it. A script holding a session cookie can send the
  site's own Origin; a proxy that drops Origin cannot turn another site's socket into one signed
  in with the visitor's cookie.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

from accounts.services import apikey_verify, bearer_key
from web.ws.db import socket_db

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from typing import Any, TypeAlias

    from asgiref.typing import ASGIReceiveCallable, ASGISendCallable

    # Channels hands the scope on as a plain dict and adds keys of its own (user, url_route...).
    Scope: TypeAlias = dict[str, Any]
    App: TypeAlias = Callable[[Scope, ASGIReceiveCallable, ASGISendCallable], Awaitable[None]]

_DEFAULT_PORTS = {"http": 80, "https": 443}

# An origin as compared: scheme, host name (lower case), port (the scheme's default filled in).
Origin = tuple[str, str, int]


def _headers(scope: Scope, name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope.get("headers", []) if key == name]


def _origin(scheme: str, netloc: str) -> Origin | None:
    """The origin of a scheme and a `host[:port]`; None when either is not one."""
    if scheme not in _DEFAULT_PORTS:
        return None
    parts = urlsplit(f"//{netloc}")
    try:
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.netloc != netloc or "@" in netloc:
        return None
    return scheme, parts.hostname, port or _DEFAULT_PORTS[scheme]


def _parse_origin(value: str) -> Origin | None:
    parts = urlsplit(value)
    if parts.path or parts.query or parts.fragment:
        return None
    return _origin(parts.scheme, parts.netloc)


def _request_scheme(scope: Scope) -> str:
    """`https` or `http`, as Django's `request.scheme` says for a request."""
    if settings.SECURE_PROXY_SSL_HEADER:
        meta_name, secure_value = settings.SECURE_PROXY_SSL_HEADER
        name = meta_name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
        values = _headers(scope, name)
        if values:
            return "https" if values[0].split(",", 1)[0].strip() == secure_value else "http"
    return "https" if scope.get("scheme") == "wss" else "http"


def _request_origin(scope: Scope) -> Origin | None:
    """The origin of the handshake itself; None unless it has one Host header, an allowed
    host."""
    hosts = _headers(scope, b"host")
    if len(hosts) != 1:
        return None
    domain, _ = split_domain_port(hosts[0])
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:  # as Django's `request.get_host`
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    if not domain or not validate_host(domain, allowed):
        return None
    return _origin(_request_scheme(scope), hosts[0].lower())


def _trusted(value: str, origin: Origin) -> bool:
    """Whether CSRF_TRUSTED_ORIGINS lists the origin, as Django's CSRF check reads it
    (`https://*.example.com` names the domain and its subdomains)."""
    netloc = urlsplit(value).netloc.lower()
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        if "*" in entry:
            parts = urlsplit(entry)
            if parts.scheme == origin[0] and is_same_domain(netloc, parts.netloc.lstrip("*")):
                return True
        elif _parse_origin(entry) == origin:
            return True
    return False


def origin_allowed(scope: Scope, value: str) -> bool:
    """Whether a handshake whose Origin header is `value` comes from this site."""
    origin = _parse_origin(value)
    if origin is None:
        return False
    return origin == _request_origin(scope) or _trusted(value, origin)


class OriginCheck:
    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        origins = _headers(scope, b"origin")
        if not origins:
            headers = [(k, v) for k, v in scope.get("headers", []) if k != b"cookie"]
            return await self.app({**scope, "headers": headers}, receive, send)
        if len(origins) == 1 and origin_allowed(scope, origins[0]):
            return await self.app(scope, receive, send)
        await deny(receive, send)


async def deny(receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    """Refuse the handshake (the server answers 403) and end: unlike Channels' WebsocketDenier,
    no consumer is started, so no channel is opened on the channel layer for a socket that will
    never hear anything."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": 1000, "reason": ""})


class BearerAuth:
    """`Authorization: Bearer <key>` on the handshake authenticates as the key's user (for
    integrations), and notes the key's id as `scope["api_key"]` (the socket closes when that key
    is revoked); a present but invalid key leaves the connection anonymous, so it is refused."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        header = next((v for k, v in scope.get("headers", []) if k == b"authorization"), None)
        if header is not None:
            try:
                raw = bearer_key(header)
            except ValueError:
                raw = ""
            if raw is not None:
                key = await socket_db(apikey_verify)(raw) if raw else None
                if key is None:
                    scope = {**scope, "user": AnonymousUser()}
                else:
                    scope = {**scope, "user": key.user, "api_key": key.pk}
        return await self.app(scope, receive, send)
