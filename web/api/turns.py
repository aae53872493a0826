"""REST API for turns (/api/v1/): send a message (to a session, or by session key), read a
turn, stop it. Thin: validate, call a service, serialise."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.services import chat_submit, turn_submit
from core import wake
from core.api import body_fingerprint
from core.db import release_connection
from core.errors import InvalidInput
from sessions_app.models import Turn
from sessions_app.selectors import (
    get_session_for_user,
    get_turn_for_user,
    session_ref_for_user,
    turn_reloaded,
)
from sessions_app.turns import turn_cancel
from web.api.serializers import (
    ChatIn,
    TurnIn,
    TurnOut,
)

if TYPE_CHECKING:
    pass


from web.api.sessions import request_user

IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="a retried POST with the same key and the same body returns the first turn; "
    "the same key with another body is a 409",
)


class SessionTurns(APIView):
    @extend_schema(
        request=TurnIn,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: TurnOut, 202: TurnOut},
        summary="Send a message: 202 with the queued turn, or 201 once finished with wait",
        description="A message sent in an archived session brings the session back "
        "(`archived_at` null again, announced as `session.changed`).",
    )
    def post(self, request: Request, pk: int) -> Response:
        # Not read here: the submission's lock, scoped to the user, finds it theirs or a 404.
        session = session_ref_for_user(request.user, pk)
        try:
            data = TurnIn.validated(request.data)
            turn = turn_submit(
                session=session,
                message=data["message"],
                idempotency_key=_idempotency_key(request),
                request_fingerprint=body_fingerprint(data),
            )
        except (ValidationError, InvalidInput):
            # Bad input to a session that is not theirs is a 404 all the same (read only then).
            get_session_for_user(request.user, pk)
            raise
        return _turn_answer(turn, wait=data["wait"])


def _idempotency_key(request: Request) -> str:
    key = request.headers.get("Idempotency-Key", "").strip()
    if len(key) > 200:
        raise InvalidInput("The Idempotency-Key header is longer than 200 characters.")
    return key


def _turn_answer(turn: Turn, *, wait: bool) -> Response:
    """A turn just submitted: 202 with it as it stands, or with `wait`, 201 once it has ended
    (202 if it has not by API_TURN_WAIT_SECONDS)."""
    if wait:
        turn = _wait_for(turn)
    finished = not turn.is_active
    code = status.HTTP_201_CREATED if wait and finished else status.HTTP_202_ACCEPTED
    return Response(TurnOut(turn).data, status=code)


class Chat(APIView):
    @extend_schema(
        request=ChatIn,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: TurnOut, 202: TurnOut},
        summary="Send a message to your session of a session key (made on first use): as "
        "POST /sessions/{id}/turns/",
    )
    def post(self, request: Request) -> Response:
        data = ChatIn.validated(request.data)
        turn = chat_submit(
            owner=request_user(request),
            session_key=data["session_key"],
            message=data["message"],
            idempotency_key=_idempotency_key(request),
            request_fingerprint=body_fingerprint(data),
        )
        return _turn_answer(turn, wait=data["wait"])


# The events after which a waiting request reads the turn again: its end, or its pause for an
# approval (the owner must answer before it can end).
TURN_END_EVENTS = frozenset(
    {"turn.finished", "turn.failed", "turn.cancelled", "tool.approval_requested"}
)


def _wait_for(turn: Turn) -> Turn:
    """Wait until the turn ends, waits for an approval (`awaiting_approval`, answered at once:
    the caller has to approve), or API_TURN_WAIT_SECONDS pass (then it is still queued/running).
    The turn's end rings its doorbell (core.wake), which wakes the wait at once, in whichever
    process the turn ran; the database is also read every
    API_TURN_WAIT_POLL_SECONDS, so an end that sends no event is seen too. While it waits the
    database connection goes back to the pool, so requests that wait never starve the others of
    connections."""

    latest = [turn]

    def ended() -> bool:
        # Read again with the messages its texts are read through (one query).
        latest[0] = turn_reloaded(turn) or latest[0]
        release_connection()
        current = latest[0]
        return not current.is_active or current.status == Turn.Status.AWAITING_APPROVAL

    wake.wait_until(
        turn=turn.pk,
        types=TURN_END_EVENTS,
        done=ended,
        timeout=settings.API_TURN_WAIT_SECONDS,
        poll=settings.API_TURN_WAIT_POLL_SECONDS,
    )
    return latest[0]


class TurnDetail(APIView):
    @extend_schema(responses=TurnOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(TurnOut(get_turn_for_user(request.user, pk)).data)


class TurnCancel(APIView):
    @extend_schema(
        request=None,
        responses=TurnOut,
        summary="Stop a queued or running turn: 200, now cancelled; 409 when it already ended",
    )
    def post(self, request: Request, pk: int) -> Response:
        turn = turn_cancel(turn=get_turn_for_user(request.user, pk))
        return Response(TurnOut(turn).data)
