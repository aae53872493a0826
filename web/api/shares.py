"""REST API for share links (/api/v1/branches/{id}/share/, /api/v1/shares/): make one, list
yours, delete one. Thin: validate, call a service, serialise. Another user's branch, checkpoint
or link is a 404, as a missing one."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import User
from checkpoints.selectors import get_checkpoint_for_user
from core.api import StrictSerializer, paginate
from core.api_schema import paginated
from sessions_app.selectors import get_branch_for_user
from sharing.models import ShareLink
from sharing.selectors import shares_for_user
from sharing.services import share_create, share_delete
from web.share_links import share_url, shared_url


class ShareOut(serializers.Serializer[ShareLink]):
    id = serializers.IntegerField()
    url = serializers.SerializerMethodField(
        help_text="The public address (null only when the server's key changed since)"
    )
    session = serializers.IntegerField(source="session_id")
    branch = serializers.IntegerField(source="branch_id")
    checkpoint = serializers.IntegerField(source="checkpoint_id", allow_null=True)
    message_count = serializers.IntegerField(help_text="The shared point: messages shown")
    views = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    last_viewed_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_url(self, share: ShareLink) -> str | None:
        token: str | None = self.context.get("tokens", {}).get(share.pk)
        request = self.context["request"]
        return shared_url(request, token) if token else share_url(request, share)


class ShareIn(StrictSerializer):
    checkpoint = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=2**63 - 1,
        help_text="Share only up to this checkpoint of the branch's history",
    )


def _user(request: Request) -> User:
    user = request.user
    # IsAuthenticated, the default permission, lets only users in.
    if not isinstance(user, User):
        raise NotAuthenticated()
    return user


class BranchShare(APIView):
    @extend_schema(
        request=ShareIn,
        responses={201: ShareOut},
        summary="A share link to the branch's history as it stands (or up to a checkpoint)",
    )
    def post(self, request: Request, pk: int) -> Response:
        user = _user(request)
        data = ShareIn.validated(request.data)
        branch = get_branch_for_user(user, pk)
        checkpoint = None
        if data.get("checkpoint") is not None:
            checkpoint = get_checkpoint_for_user(user, data["checkpoint"])
        share, token = share_create(owner=user, branch=branch, checkpoint=checkpoint)
        context: dict[str, Any] = {"request": request, "tokens": {share.pk: token}}
        return Response(ShareOut(share, context=context).data, status=status.HTTP_201_CREATED)


class ShareList(APIView):
    @extend_schema(responses=paginated(ShareOut, "Share"), summary="Your share links, newest first")
    def get(self, request: Request) -> Response:
        return paginate(self, shares_for_user(request.user), ShareOut, {"request": request})


class ShareDetail(APIView):
    @extend_schema(responses={204: None}, summary="Delete a share link: its address is a 404")
    def delete(self, request: Request, pk: int) -> Response:
        share_delete(owner=_user(request), share_id=pk)
        return Response(status=status.HTTP_204_NO_CONTENT)
