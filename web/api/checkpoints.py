"""REST API for checkpoints and restores (/api/v1/)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from checkpoints.models import Checkpoint
from checkpoints.selectors import get_checkpoint_for_user, session_checkpoints
from checkpoints.services import (
    RESTORE_MODES,
    RESTORE_SCOPES,
    checkpoint_create,
    checkpoint_delete,
    checkpoint_restore,
)
from core.api import StrictSerializer, TextField, paginate
from core.api_schema import paginated
from sessions_app.selectors import current_branch, get_session_for_user
from web.api.serializers import BranchOut, MessageOut
from web.api.sessions import BRANCH_PARAM, branch_param


class CheckpointOut(serializers.Serializer[Checkpoint]):
    id = serializers.IntegerField()
    name = serializers.CharField(source="checkpoint_name")
    description = serializers.CharField()
    is_auto = serializers.BooleanField()
    branch = serializers.IntegerField(source="branch_id")
    message_count = serializers.IntegerField()
    session_state = serializers.JSONField()
    created_at = serializers.DateTimeField()
    metadata = serializers.JSONField()


class CheckpointIn(StrictSerializer):
    name = TextField(required=False, allow_blank=True, trim_whitespace=False)
    description = TextField(required=False, allow_blank=True, trim_whitespace=False)


class RestoreIn(StrictSerializer):
    mode = serializers.ChoiceField(choices=RESTORE_MODES, required=False, default="branch")
    scope = serializers.ChoiceField(
        choices=RESTORE_SCOPES,
        required=False,
        default="all",
        help_text="What comes back: `all` (the conversation and the files), `conversation` "
        "(the files stay as they are now) or `files` (the conversation stays; a new version of "
        "each changed file, as the user's own write; the mode changes nothing then).",
        error_messages={
            "invalid_choice": "Unknown restore scope \"{input}\": use 'all', 'conversation' "
            "or 'files'.",
            "null": "The restore scope may not be null: use 'all', 'conversation' or 'files'.",
        },
    )


RestoreOut = inline_serializer(
    "RestoreResult",
    {
        "branch": BranchOut(),
        "deleted_checkpoints": serializers.ListField(child=serializers.IntegerField()),
        "irreversible": MessageOut(
            many=True,
            help_text="The tool messages of effect external that the restore leaves behind "
            "(after the checkpoint on the branch it abandons or cuts), oldest first: nothing "
            "here can undo them.",
        ),
    },
)


class SessionCheckpoints(APIView):
    @extend_schema(
        parameters=[BRANCH_PARAM],
        responses=paginated(CheckpointOut, "Checkpoint"),
        summary="Checkpoints of every branch (or of one), newest first",
    )
    def get(self, request: Request, pk: int) -> Response:
        session = get_session_for_user(request.user, pk)
        branch = branch_param(request, session) if request.query_params.get("branch") else None
        return paginate(self, session_checkpoints(session, branch=branch), CheckpointOut)

    @extend_schema(
        request=CheckpointIn,
        responses={201: CheckpointOut},
        summary="A manual checkpoint of the current branch",
    )
    def post(self, request: Request, pk: int) -> Response:
        session = get_session_for_user(request.user, pk)
        data = CheckpointIn.validated(request.data)
        checkpoint = checkpoint_create(
            branch=current_branch(session),
            name=data.get("name") or None,
            description=data.get("description", ""),
            metadata={"trigger": "api"},
        )
        return Response(CheckpointOut(checkpoint).data, status=status.HTTP_201_CREATED)


class CheckpointDetail(APIView):
    @extend_schema(responses=CheckpointOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(CheckpointOut(get_checkpoint_for_user(request.user, pk)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        checkpoint_delete(checkpoint=get_checkpoint_for_user(request.user, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class CheckpointRestore(APIView):
    @extend_schema(
        request=RestoreIn,
        responses=RestoreOut,
        parameters=[OpenApiParameter("pk", int, OpenApiParameter.PATH)],
        summary="Restore: as a new current branch (default) or by rewinding its branch",
    )
    def post(self, request: Request, pk: int) -> Response:
        checkpoint = get_checkpoint_for_user(request.user, pk)
        data = RestoreIn.validated(request.data)
        session = checkpoint.branch.session
        result = checkpoint_restore(
            checkpoint=checkpoint, mode=data["mode"], scope=data["scope"], session=session
        )
        deleted = [d.id for d in result.deleted_checkpoints]
        result.branch.refresh_from_db()
        return Response(
            {
                "branch": BranchOut(result.branch).data,
                "deleted_checkpoints": deleted,
                "irreversible": MessageOut(result.irreversible, many=True).data,
            }
        )
