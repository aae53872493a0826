"""`Authorization: Bearer <key>` for the REST API (the event stream reads the same header)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from accounts.services import apikey_authenticate, bearer_key
from core import logs

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema
    from rest_framework.request import Request

    from accounts.models import User


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
        # Read inside the view, after the middleware bound the request's ids: the rest of the
        # request's lines (and the turn it queues) name this user.
        logs.bind(user_id=user.pk)
        return (user, None)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class BearerKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "web.api.authentication.BearerKeyAuthentication"
    name = "bearerKey"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key from your profile page or `manage.py createapikey`.",
        }
