"""REST API for one message (/api/v1/messages/{id}/...): its owner's feedback on a reply.
Thin: validate, call a service, serialise."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app.selectors import get_message_for_user
from sessions_app.services import message_feedback_set
from web.api.serializers import FeedbackIn, MessageOut


class MessageFeedback(APIView):
    @extend_schema(
        request=FeedbackIn,
        responses=MessageOut,
        summary="Rate an assistant reply of yours: up or down, with an optional note",
    )
    def post(self, request: Request, pk: int) -> Response:
        message = get_message_for_user(request.user, pk)
        data = FeedbackIn.validated(request.data)
        message = message_feedback_set(
            message=message, rating=data["rating"], note=data.get("note")
        )
        return Response(MessageOut(message).data)
