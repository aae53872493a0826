"""POST /api/v1/turns/{id}/approve/: the owner's answer to the tool call a turn waits for."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app.approvals import turn_approve
from sessions_app.selectors import get_turn_for_user
from web.api.serializers import ApproveIn, TurnOut


class TurnApprove(APIView):
    @extend_schema(
        request=ApproveIn,
        responses=TurnOut,
        summary="Approve or refuse the tool call a turn waits for: 200 turn (running again); "
        "409, with the reason, when that call does not wait (the turn ended, the call was "
        "answered, it belongs to an earlier attempt, or another call waits)",
    )
    def post(self, request: Request, pk: int) -> Response:
        turn = get_turn_for_user(request.user, pk)
        data = ApproveIn.validated(request.data)
        turn = turn_approve(
            turn=turn,
            tool_call_id=data["tool_call_id"],
            approved=data["approved"],
            call=data.get("call"),
            attempt=data.get("attempt"),
        )
        return Response(TurnOut(turn).data)
