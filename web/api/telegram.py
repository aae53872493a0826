"""REST API of the Telegram bridge: POST /api/v1/telegram/link/ makes a one-time link code (the
chat sends it to the bot as `/start CODE`). Thin: check the bridge is on, call the service."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import User
from integrations.telegram.links import link_code_create


class LinkCodeOut(serializers.Serializer[object]):
    code = serializers.CharField(help_text="send it to the bot as /start CODE; used once")
    expires_at = serializers.DateTimeField(help_text="ten minutes after it was made")


class TelegramLink(APIView):
    @extend_schema(
        request=None,
        responses={201: LinkCodeOut},
        summary="A one-time code that links a Telegram chat to you (/start CODE)",
        description=(
            "Valid ten minutes, single use; making one retires your earlier unused codes. "
            "404 when the server's Telegram bridge is off."
        ),
    )
    def post(self, request: Request) -> Response:
        user = request.user
        # IsAuthenticated, the default permission, lets only users in.
        if not isinstance(user, User):
            raise NotAuthenticated()
        made = link_code_create(user=user)
        body = LinkCodeOut({"code": made.code, "expires_at": made.expires_at}).data
        return Response(body, status=status.HTTP_201_CREATED)
