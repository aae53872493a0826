"""REST API for sessions, messages, turns and branches (/api/v1/). Thin: validate, call a
service, serialise. Another user's object is a 404, as a missing one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import User
from agents.context import context_usage
from agents.services import chat_submit, turn_submit
from agents.summaries import session_summaries_schedule
from checkpoints.transfer import session_export, session_import
from checkpoints.transfer_markdown import EXPORT_FORMATS, export_format, markdown_response
from core import wake
from core.api import Pagination, body_fingerprint, paginate
from core.api_schema import paginated
from core.errors import InvalidInput
from sessions_app.errors import BranchNotFound, ImportTooLarge
from sessions_app.keys import clean_session_key
from sessions_app.labels import session_branch_labels
from sessions_app.models import Branch, Session, Turn
from sessions_app.search import search_clean
from sessions_app.selectors import (
    SESSION_ORDERS,
    branch_history_rows,
    current_branch,
    get_branch_for_user,
    get_session_for_user,
    get_turn_for_user,
    session_branches,
    sessions_for_user,
    sessions_listed,
    with_branch_summary,
)
from sessions_app.services import (
    branch_activate,
    branch_rename,
    session_create,
    session_delete,
    session_update,
)
from sessions_app.turns import turn_cancel
from web.api.serializers import (
    BranchContextOut,
    BranchIn,
    BranchOut,
    ChatIn,
    MessageOut,
    SessionCreateIn,
    SessionIn,
    SessionOut,
    TurnIn,
    TurnOut,
)

if TYPE_CHECKING:
    from sessions_app.models import AnyUser


def _user(request: Request) -> User:
    """The user of an API request."""
    user = request.user
    if not isinstance(user, User):  # IsAuthenticated, the default permission, lets only users in
        raise NotAuthenticated()
    return user


def _session_out(user: AnyUser, pk: int) -> dict[str, Any]:
    session = with_branch_summary(sessions_for_user(user)).filter(pk=pk).first()
    return SessionOut(session).data


def branch_param(request: Request, session: Session) -> Branch:
    """?branch=<id> names one of the session's branches; without it, the current one."""
    raw = request.query_params.get("branch")
    if raw in (None, ""):
        return current_branch(session)
    branch = get_branch_for_user(request.user, raw)
    if branch.session_id != session.pk:
        raise InvalidInput(f"Branch {raw} is not a branch of this session.")
    return branch


def _flag(raw: str | None, *, name: str) -> bool:
    """A true/false query parameter; absent is false."""
    if raw in (None, ""):
        return False
    value = str(raw).lower()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise InvalidInput(f"{name} must be true or false.")


BRANCH_PARAM = OpenApiParameter(
    "branch", int, description="a branch of this session (default: the current one)"
)


IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="a retried POST with the same key and the same body returns the first turn; "
    "the same key with another body is a 409",
)


class SessionList(APIView):
    @extend_schema(
        operation_id="sessions_list",
        parameters=[
            OpenApiParameter(
                "q",
                str,
                description="only sessions whose name or message text matches this: every "
                "word, as the start of a word (restor finds restored); at most 200 characters, "
                "with a letter or digit and no control character (else 400)",
            ),
            OpenApiParameter(
                "order",
                str,
                enum=["created", "activity"],
                description="created (default): newest first; activity: most recently active first",
            ),
            OpenApiParameter(
                "archived", bool, description="true: the archived sessions (and only those)"
            ),
            OpenApiParameter(
                "pinned", bool, description="true: only pinned sessions; false: only the others"
            ),
            OpenApiParameter(
                "session_key",
                str,
                description="only the session of this key (agent:<agentId>:<scope>:<chatId>), "
                "matched exactly",
            ),
        ],
        responses=paginated(SessionOut, "Session"),
        summary="Your sessions, newest first (or most recently active first)",
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        query = search_clean(params.get("q"))
        order = params.get("order") or "created"
        if order not in SESSION_ORDERS:
            raise InvalidInput("order must be created or activity.")
        archived = _flag(params.get("archived"), name="archived")
        raw_key = params.get("session_key")
        session_key = None if raw_key in (None, "") else clean_session_key(raw_key)
        raw_pinned = params.get("pinned")
        pinned = None if raw_pinned in (None, "") else _flag(raw_pinned, name="pinned")
        sessions = sessions_listed(
            request.user,
            query=query,
            archived=archived,
            order=order,
            session_key=session_key,
            pinned=pinned,
        )
        return paginate(self, with_branch_summary(sessions), SessionOut)

    @extend_schema(request=SessionCreateIn, responses={201: SessionOut}, summary="New session")
    def post(self, request: Request) -> Response:
        data = SessionCreateIn.validated(request.data)
        session = session_create(
            owner=_user(request), name=data["name"], metadata=data.get("metadata")
        )
        return Response(_session_out(request.user, session.pk), status=status.HTTP_201_CREATED)


class SessionDetail(APIView):
    @extend_schema(responses=SessionOut)
    def get(self, request: Request, pk: int) -> Response:
        session = get_session_for_user(request.user, pk)
        return Response(_session_out(request.user, session.pk))

    @extend_schema(request=SessionIn, responses=SessionOut)
    def patch(self, request: Request, pk: int) -> Response:
        session = get_session_for_user(request.user, pk)
        data = SessionIn.validated(request.data)
        if data:
            session_update(
                session=session,
                name=data.get("name"),
                metadata=data.get("metadata"),
                archived=data.get("archived"),
                pinned=data.get("pinned"),
            )
        return Response(_session_out(request.user, session.pk))

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        session_delete(session=get_session_for_user(request.user, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionMessages(APIView):
    @extend_schema(
        parameters=[BRANCH_PARAM],
        responses=paginated(MessageOut, "Message"),
        summary="The history of the current (or given) branch, oldest first",
    )
    def get(self, request: Request, pk: int) -> Response:
        session = get_session_for_user(request.user, pk)
        branch = branch_param(request, session)
        paginator = Pagination()
        # Positions are dense, so a page of history is a range of positions: no COUNT(*).
        limit = paginator.get_limit(request)
        assert limit is not None  # noqa: S101 - narrowing for mypy: Pagination has a default_limit
        paginator.limit = limit
        paginator.offset = offset = paginator.get_offset(request)
        paginator.count = branch.message_count
        paginator.request = request
        # Plain dicts in MessageOut's shape, straight from the cursor: no model instance and no
        # serializer field per value (it was most of the cost of a long history).
        rows = branch_history_rows(branch, start=offset, end=offset + limit)
        return paginator.get_paginated_response(rows)


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
        session = get_session_for_user(request.user, pk)
        data = TurnIn.validated(request.data)
        turn = turn_submit(
            session=session,
            message=data["message"],
            idempotency_key=_idempotency_key(request),
            request_fingerprint=body_fingerprint(data),
        )
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
            owner=_user(request),
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
        latest[0] = (
            Turn.objects.select_related("user_message", "reply_message").filter(pk=turn.pk).first()
            or latest[0]
        )
        if not connection.in_atomic_block:
            connection.close()
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


class SessionBranches(APIView):
    @extend_schema(
        responses=paginated(BranchOut, "Branch"), summary="The session's branches, oldest first"
    )
    def get(self, request: Request, pk: int) -> Response:
        session = get_session_for_user(request.user, pk)
        labels = session_branch_labels(session)
        return paginate(self, session_branches(session), BranchOut, {"labels": labels})


class BranchDetail(APIView):
    @extend_schema(
        request=BranchIn,
        responses=BranchOut,
        summary="Name a branch (1 to 200 characters; the pages show the name too)",
    )
    def patch(self, request: Request, pk: int) -> Response:
        branch = get_branch_for_user(request.user, pk)
        data = BranchIn.validated(request.data)
        branch = branch_rename(branch=branch, name=data["name"])
        branch.refresh_from_db()
        return Response(BranchOut(branch).data)


class BranchActivate(APIView):
    @extend_schema(request=None, responses=BranchOut, summary="Make a branch current")
    def post(self, request: Request, pk: int) -> Response:
        branch = get_branch_for_user(request.user, pk)
        branch_activate(branch=branch)
        try:  # read again for its counts; deleted since (a racing delete): 404, never a 500
            branch.refresh_from_db()
        except Branch.DoesNotExist:
            raise BranchNotFound() from None
        return Response(BranchOut(branch).data)


class BranchContext(APIView):
    @extend_schema(
        responses=BranchContextOut,
        summary="How much of the model's window the branch uses, and the summary of what "
        "the model no longer sees whole",
    )
    def get(self, request: Request, pk: int) -> Response:
        branch = get_branch_for_user(request.user, pk)
        usage = context_usage(branch)
        summary = usage.summary
        return Response(
            BranchContextOut(
                {
                    "branch": branch.pk,
                    "budget": usage.limits.context,
                    "reserve": usage.limits.reserve,
                    "used": usage.tokens,
                    "percent": usage.percent,
                    "message_count": usage.message_count,
                    "view_start": usage.view_start,
                    "summary": summary,
                    "summarizing": usage.summarizing,
                }
            ).data
        )


class SessionExport(APIView):
    def perform_content_negotiation(
        self, request: Request, force: bool = False
    ) -> tuple[JSONRenderer, str]:
        """JSON, whatever `?format=` says: here it names the document's format (below), not
        DRF's renderer; the Markdown document is an answer of its own."""
        return JSONRenderer(), JSONRenderer.media_type

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "format",
                str,
                enum=list(EXPORT_FORMATS),
                description="json (default): the whole session, every branch, as one document "
                "that imports back; markdown: the current branch to read, as text/markdown",
            )
        ],
        responses={200: OpenApiTypes.OBJECT, (200, "text/markdown"): OpenApiTypes.STR},
        summary="The whole session as one document (or its current branch as Markdown)",
    )
    def get(self, request: Request, pk: int) -> Response | HttpResponse:
        session = get_session_for_user(request.user, pk)
        if export_format(request.query_params.get("format")) == "markdown":
            return markdown_response(session)
        return Response(session_export(session=session))


class SessionImport(APIView):
    @extend_schema(
        request=inline_serializer("ImportDocument", {"format": serializers.CharField()}),
        responses={201: SessionOut},
        summary="Import an exported session as a new session of yours",
    )
    def post(self, request: Request) -> Response:
        limit = settings.ROLLBACK_IMPORT_MAX_BYTES
        try:
            length = int(request.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        if length > limit:
            raise ImportTooLarge(f"The document is {length} bytes; the limit is {limit} bytes.")
        session = session_import(owner=_user(request), raw=request.body)
        session_summaries_schedule(session=session)
        return Response(_session_out(request.user, session.pk), status=status.HTTP_201_CREATED)
