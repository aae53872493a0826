"""Clients for the security tests: a browser's (session cookie, CSRF enforced, with a valid
token), an integration's (Bearer key), and the handshake headers of a WebSocket."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.middleware.csrf import get_token
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from accounts.services import apikey_create


def browser(user=None, **headers: str) -> Client:
    """A client that checks CSRF like the real site and holds a valid token (cookie and
    X-CSRFToken header), signed in as `user` when given. A refusal seen through it is never a
    CSRF failure in disguise."""
    client = Client(enforce_csrf_checks=True, **headers)
    if user is not None:
        client.force_login(user)
    request = RequestFactory().get("/")
    token = get_token(request)
    client.cookies[settings.CSRF_COOKIE_NAME] = request.META["CSRF_COOKIE"]
    client.defaults["HTTP_X_CSRFTOKEN"] = token
    return client


def bearer(user, name: str = "security tests") -> APIClient:
    """An integration holding a fresh API key of `user`."""
    _, secret = apikey_create(user=user, name=name)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    client.secret = secret
    return client


def cookie_headers(user, origin: str | None = None) -> list[tuple[bytes, bytes]]:
    """The handshake headers of a browser signed in as `user` (a session of its own)."""
    client = Client()
    client.force_login(user)
    value = client.cookies[settings.SESSION_COOKIE_NAME].value
    headers = [(b"cookie", f"{settings.SESSION_COOKIE_NAME}={value}".encode())]
    if origin:  # a browser sends its page's origin, and the Host it connects to
        headers += [(b"origin", origin.encode()), (b"host", urlsplit(origin).netloc.encode())]
    return headers
