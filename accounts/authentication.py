"""`Authorization: Bearer <key>` for the REST API (and, in ws_security, the event stream)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from .services import apikey_authenticate

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema
    from rest_framework.request import Request

    from .models import User


def bearer_key(header: bytes) -> str | None:
    """The key of a `Bearer <key>` header; None when the header is another scheme or absent.
    Raises ValueError for a Bearer header that is malformed."""
    parts = header.split()
    if not parts or parts[0].lower() != b"bearer":
        return None
    if len(parts) != 2:
        raise ValueError("Give the API key as 'Authorization: Bearer <key>'.")
    try:
        return parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise ValueError("That is not an API key.") from None


class BearerKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[User, None] | None:
        try:
            raw = bearer_key(get_authorization_header(request))
        except ValueError as exc:
            raise AuthenticationFailed(str(exc)) from None
        if raw is None:
            return None
        user = apikey_authenticate(raw)
        if user is None:
            raise AuthenticationFailed("Invalid or revoked API key.")
        return (user, None)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class BearerKeyScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.BearerKeyAuthentication"
    name = "bearerKey"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key from your profile page or `manage.py createapikey`.",
        }
