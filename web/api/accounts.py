"""REST API for the user's API keys (/api/v1/keys/). The secret is in the answer to the POST
that creates a key, and nowhere else, ever."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import ApiKey, User
from accounts.selectors import api_keys_for_user
from accounts.services import apikey_create, apikey_revoke
from core.api import StrictSerializer, TextField, paginate
from core.api_schema import paginated


class KeyOut(serializers.Serializer[ApiKey]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class NewKeyOut(KeyOut):
    key = serializers.CharField(help_text="the secret: shown this once, never again")


class KeyIn(StrictSerializer):
    name = TextField(trim_whitespace=False)


class KeyList(APIView):
    @extend_schema(
        responses=paginated(KeyOut, "Key"), summary="Your API keys (never their secrets)"
    )
    def get(self, request: Request) -> Response:
        return paginate(self, api_keys_for_user(request.user), KeyOut)

    @extend_schema(request=KeyIn, responses={201: NewKeyOut}, summary="A new API key")
    def post(self, request: Request) -> Response:
        user = request.user
        # IsAuthenticated, the default permission, lets only users in.
        if not isinstance(user, User):
            raise NotAuthenticated()
        data = KeyIn.validated(request.data)
        key, secret = apikey_create(user=user, name=data["name"])
        body = {**KeyOut(key).data, "key": secret}
        return Response(body, status=status.HTTP_201_CREATED)


class KeyDetail(APIView):
    @extend_schema(responses={204: None}, summary="Revoke an API key")
    def delete(self, request: Request, pk: int) -> Response:
        user = request.user
        # IsAuthenticated, the default permission, lets only users in.
        if not isinstance(user, User):
            raise NotAuthenticated()
        apikey_revoke(user=user, key_id=pk)
        return Response(status=status.HTTP_204_NO_CONTENT)
