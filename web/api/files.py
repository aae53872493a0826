"""REST API for a session's workspace (/api/v1/sessions/{id}/files/): list, read, write, delete.

Thin, like the rest of the API: the workspace package validates and writes. A file's content
travels raw both ways, not inside JSON, so a client can `curl -T` a file up and save the answer
of a GET as it is: a text file as text/plain, any other (`binary` in its fields) as its own
type. Errors stay JSON ({"detail"}) whatever the file.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from checkpoints.errors import CheckpointNotFound
from checkpoints.selectors import get_checkpoint_for_user
from core.api import paginate
from core.api_schema import paginated
from core.errors import InvalidInput
from core.renderers import JSONRenderer
from sessions_app.errors import BranchNotFound
from sessions_app.models import Branch, Session
from sessions_app.selectors import current_branch, get_branch_for_user, get_session_for_user
from web.file_responses import file_response
from workspace.selectors import workspace_file_bytes, workspace_files
from workspace.services import file_delete, file_write


class FileOut(serializers.Serializer[Any]):  # a WorkspaceFile, or a list of them
    path = serializers.CharField()
    size = serializers.IntegerField(help_text="Bytes (a text file's in UTF-8).")
    sha256 = serializers.CharField()
    updated_at = serializers.DateTimeField(help_text="When this version was written.")
    binary = serializers.BooleanField(
        help_text="Bytes that are not UTF-8 text (an image, a PDF): read as their own type, "
        "as an attachment; a text file is read as text/plain."
    )


class TextParser(BaseParser):
    """Declares that a write takes raw text (for the schema and content negotiation); the view
    reads the body itself, as bytes, so the workspace's own check decides what UTF-8 is."""

    media_type = "text/plain"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return stream.read() if stream is not None else b""


class AnyBodyParser(TextParser):
    """Any other body is read the same way: the workspace's own check refuses what is not UTF-8
    text, and a browser's request to a method the view does not answer (a POST whose CSRF check
    reads the body first) gets its 405, not a 415."""

    media_type = "*/*"


class TextRenderer(BaseRenderer):
    """A file's content, as it is (a client asking for text/plain only is not a 406)."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Any = None,
    ) -> bytes:
        return str(data or "").encode("utf-8")


BRANCH = OpenApiParameter(
    "branch", int, description="a branch of this session (default: the current one)"
)
CHECKPOINT = OpenApiParameter(
    "checkpoint", int, description="a checkpoint of this session: its files as it captured them"
)
PATH = OpenApiParameter(
    "path",
    str,
    OpenApiParameter.PATH,
    description="the file's path in the workspace, like notes/plan.md (slashes as they are, "
    "other reserved characters percent-encoded)",
)


def _branch(request: Request, session: Session) -> Branch:
    """?branch=<id>, one of this session's branches (another session's is a 404, as a
    missing one); without it, the current branch."""
    raw = request.query_params.get("branch")
    if raw in (None, ""):
        return current_branch(session)
    branch = get_branch_for_user(request.user, raw)
    if branch.session_id != session.pk:
        raise BranchNotFound()
    return branch


def _point(request: Request, session: Session) -> tuple[Branch, int | None]:
    """Where a read looks: the branch (and the version mark) named by ?branch= or
    ?checkpoint= (not both), else the current branch as it stands."""
    raw = request.query_params.get("checkpoint")
    if raw in (None, ""):
        return _branch(request, session), None
    if request.query_params.get("branch") not in (None, ""):
        raise InvalidInput("Give either branch or checkpoint, not both.")
    checkpoint = get_checkpoint_for_user(request.user, raw)
    if checkpoint.branch.session_id != session.pk:
        raise CheckpointNotFound()
    return checkpoint.branch, checkpoint.files_mark


class SessionFiles(APIView):
    @extend_schema(
        operation_id="sessions_files_list",
        parameters=[BRANCH, CHECKPOINT],
        responses=paginated(FileOut, "File"),
        summary="The workspace's files (current branch, a branch, or as of a checkpoint)",
    )
    def get(self, request: Request, pk: int) -> Response:
        session = get_session_for_user(request.user, pk)
        branch, mark = _point(request, session)
        return paginate(self, workspace_files(branch, mark=mark), FileOut)


class SessionFile(APIView):
    parser_classes = (TextParser, AnyBodyParser)
    renderer_classes = (JSONRenderer, TextRenderer)

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        """The content (GET) is its own text/plain answer; everything else (a written file's
        fields, every error) is JSON, whatever the client's Accept asked for."""
        if isinstance(response, Response):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)

    @extend_schema(
        operation_id="sessions_files_read",
        parameters=[PATH, BRANCH, CHECKPOINT],
        responses={
            (200, "text/plain"): OpenApiTypes.STR,
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
        },
        summary="A file's content: text as text/plain, others as their type, as an attachment",
    )
    def get(self, request: Request, pk: int, path: str) -> HttpResponse:
        session = get_session_for_user(request.user, pk)
        branch, mark = _point(request, session)
        found, content = workspace_file_bytes(branch, path, mark=mark)
        return file_response(found.path, content)

    @extend_schema(
        operation_id="sessions_files_write",
        parameters=[PATH],
        request={"text/plain": OpenApiTypes.STR, "application/octet-stream": OpenApiTypes.BINARY},
        responses={200: FileOut, 201: FileOut},
        summary="Write a file of the current branch (201 when new, 200 when replaced)",
    )
    def put(self, request: Request, pk: int, path: str) -> Response:
        session = get_session_for_user(request.user, pk)
        written = file_write(
            branch=current_branch(session), path=path, content=request.body, by="api"
        )
        code = status.HTTP_201_CREATED if written.created else status.HTTP_200_OK
        return Response(FileOut(written.file).data, status=code)

    @extend_schema(
        operation_id="sessions_files_delete",
        parameters=[PATH],
        responses={204: None},
        summary="Delete a file of the current branch",
    )
    def delete(self, request: Request, pk: int, path: str) -> Response:
        session = get_session_for_user(request.user, pk)
        file_delete(branch=current_branch(session), path=path, by="api")
        return Response(status=status.HTTP_204_NO_CONTENT)
