"""REST API for sessions: the list, one session, its history, its export and an import
(/api/v1/). Thin: validate, call a service, serialise. Another user's object is a 404, as a
missing one. Turns are in web/api/turns.py, branches in web/api/branches.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import User
from agents.history_imports import history_import_started
from checkpoints.foreign.selectors import get_import_job_for_user
from checkpoints.models import ImportJob
from checkpoints.transfer import session_export
from checkpoints.transfer_markdown import EXPORT_FORMATS, export_format, markdown_response
from core.api import paginate, paginate_range
from core.api_schema import paginated
from core.errors import InvalidInput
from core.renderers import JSONRenderer
from sessions_app.errors import ImportTooLarge
from sessions_app.keys import clean_session_key
from sessions_app.models import Branch, Session
from sessions_app.search import search_clean
from sessions_app.selectors import (
    SESSION_ORDERS,
    branch_history_rows,
    current_branch,
    get_branch_for_user,
    get_session_for_user,
    session_with_summary_for_user,
    sessions_listed,
    with_branch_summary,
)
from sessions_app.services import (
    session_create,
    session_delete,
    session_update,
)
from web.api.imports import ImportJobOut, import_job_out
from web.api.serializers import (
    MessageOut,
    SessionCreateIn,
    SessionIn,
    SessionOut,
)

if TYPE_CHECKING:
    from sessions_app.models import AnyUser


def request_user(request: Request) -> User:
    """The user of an API request."""
    user = request.user
    if not isinstance(user, User):  # IsAuthenticated, the default permission, lets only users in
        raise NotAuthenticated()
    return user


def _session_out(user: AnyUser, pk: int) -> dict[str, Any]:
    session = session_with_summary_for_user(user, pk)
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
            owner=request_user(request), name=data["name"], metadata=data.get("metadata")
        )
        return Response(_session_out(request.user, session.pk), status=status.HTTP_201_CREATED)


class SessionDetail(APIView):
    @extend_schema(responses=SessionOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(_session_out(request.user, pk))  # one read: the 404 comes from it

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
        # Positions are dense, so a page of history is a range of positions: no COUNT(*). Plain
        # dicts in MessageOut's shape, straight from the cursor: no model instance and no
        # serializer field per value (it was most of the cost of a long history).
        return paginate_range(
            self,
            count=branch.message_count,
            rows=lambda start, end: branch_history_rows(branch, start=start, end=end),
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
        responses={201: SessionOut, 202: ImportJobOut},
        summary="Import an exported session, or a ChatGPT, Open WebUI or LibreChat export",
        description="Rollback's own export, or one conversation of another app's, is a new "
        "session (201, with `skipped`: what was left out, counted by kind). An export of several "
        "conversations is imported by a job (202): `GET /imports/{id}/` gives its progress.",
    )
    def post(self, request: Request) -> Response:
        limit = settings.ROLLBACK_IMPORT_MAX_BYTES
        try:
            length = int(request.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        if length > limit:
            raise ImportTooLarge(f"The document is {length} bytes; the limit is {limit} bytes.")
        imported = history_import_started(owner=request_user(request), raw=request.body)
        if isinstance(imported, ImportJob):
            job = get_import_job_for_user(request.user, imported.pk)
            return Response(
                import_job_out(job),
                status=status.HTTP_202_ACCEPTED,
                headers={"Location": reverse("api:import", args=[job.pk])},
            )
        body = {**_session_out(request.user, imported.session.pk), "skipped": imported.skipped}
        return Response(body, status=status.HTTP_201_CREATED)
