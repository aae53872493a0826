"""REST API for the MCP servers a user may use (/api/v1/mcp/servers/) and their own credentials
for one (PUT/DELETE /api/v1/mcp/servers/{name}/credentials/, write-only: no answer ever holds a
value). A server the user may not use is a 404, like any object that is not theirs. Thin: find
the server through agents.mcp.access, call the service, answer the server as the user sees it."""

from __future__ import annotations

from dataclasses import asdict

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import User
from agents.mcp.access import ServerView, get_server_for_user, server_views
from agents.mcp.credentials import mcp_credentials_delete, mcp_credentials_set
from core.api import StrictSerializer, paginate
from core.api_schema import paginated


class McpServerOut(serializers.Serializer[ServerView]):
    name = serializers.CharField()
    tools = serializers.ListField(
        child=serializers.CharField(), help_text="its tools' names, as last listed"
    )
    status = serializers.ChoiceField(
        choices=["available", "unavailable", "unknown"],
        help_text="as the last turn that listed it saw (unknown: not listed yet)",
    )
    needs_credentials = serializers.BooleanField(
        help_text="it asks for values of yours you have not given: it is left out of your turns"
    )
    asks_for = serializers.ListField(
        child=serializers.CharField(), help_text="the header names it asks each user for"
    )
    credentials_set = serializers.BooleanField()
    per_session = serializers.BooleanField(
        help_text="off in each session until turned on in the chat's Tools menu"
    )

    def to_representation(self, instance: ServerView) -> dict[str, object]:
        data = asdict(instance)
        data.pop("on", None)
        return data


class CredentialsIn(StrictSerializer):
    headers = serializers.DictField(
        child=serializers.JSONField(), help_text="each header the server asks for: its value"
    )


def _user(request: Request) -> User:
    user = request.user
    # IsAuthenticated, the default permission, lets only users in.
    if not isinstance(user, User):
        raise NotAuthenticated()
    return user


def _view_of(user: User, name: str) -> ServerView:
    return next(v for v in server_views(user) if v.name == name)


class McpServerList(APIView):
    @extend_schema(
        responses=paginated(McpServerOut, "McpServer"),
        summary="The MCP servers you may use (never their URLs or headers)",
    )
    def get(self, request: Request) -> Response:
        return paginate(self, server_views(_user(request)), McpServerOut)


class McpCredentials(APIView):
    @extend_schema(
        request=CredentialsIn,
        responses={200: McpServerOut},
        summary="Set your own credentials for a server (write-only: never shown again)",
    )
    def put(self, request: Request, name: str) -> Response:
        user = _user(request)
        server = get_server_for_user(user, name)
        data = CredentialsIn.validated(request.data)
        mcp_credentials_set(user=user, server=server, headers=data["headers"])
        return Response(McpServerOut(_view_of(user, server.name)).data)

    @extend_schema(responses={204: None}, summary="Remove your own credentials for a server")
    def delete(self, request: Request, name: str) -> Response:
        user = _user(request)
        server = get_server_for_user(user, name)
        mcp_credentials_delete(user=user, server=server)
        return Response(status=status.HTTP_204_NO_CONTENT)
